import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { eq, sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { runAdminAction } from "~/mockpay/server/admin";
import type { MockPayContext } from "~/mockpay/server/context";
import {
  type DeliveryDeps,
  deliverDueNotifications,
  loadNotification,
  retryAfterOf,
  STANDARD_WEBHOOKS_SCHEDULE_S,
  sendNotification,
} from "~/mockpay/server/delivery";
import {
  enableEndpoint,
  endpointFor,
  rotateEndpointKey,
  setEndpointMode,
  signingKeys,
} from "~/mockpay/server/endpoints";
import { providerDeliveryAttempt, providerEndpoint, providerNotification } from "~/mockpay/server/schema";
import { publicKeyOf, standardSignature } from "~/mockpay/server/standard-signing";
import type { AppContext } from "~/server/app-context";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, orderAwaitingPayment } from "./support/scenarios";

const vectors = JSON.parse(readFileSync("test/vectors/standard-webhooks.json", "utf8")) as {
  keys: { secret: string; oldSecret: string; secretKey: string; publicKey: string };
  cases: { payload: string; headers: Record<string, string>; expected: string; scheme: "v1" | "v1a" }[];
};

/** The secret the merchant was given, and MockPay's first for a Standard Webhooks endpoint. */
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** The file's one endpoint (the loopback's notify URL), as MockPay holds it. */
async function theEndpoint(app: AppContext, mockPay: MockPayContext) {
  return endpointFor(mockPay.db, mockPay.appId, `${app.payments.baseUrl}/api/payments/notify`, {
    mode: "standard-v1",
    firstSecret: SECRET,
  });
}

/** A trade paid at MockPay, its payment.succeeded queued and not yet sent. */
async function paidAtMockPay(app: AppContext, mockPay: MockPayContext) {
  const order = await orderAwaitingPayment(app, mockPay);
  await order.confirm();
  const [notification] = await mockPay.db
    .select()
    .from(providerNotification)
    .where(sql`${providerNotification.body}->>'out_trade_no' = ${order.outTradeNo}`);
  if (!notification) throw new Error("no notification queued");
  return { ...order, notificationId: notification.id };
}

async function paymentStatus(app: AppContext, outTradeNo: string) {
  const [row] = await app.db.$client<{ status: string }[]>`
    SELECT status FROM payment_order WHERE out_trade_no = ${outTradeNo}`;
  return row?.status;
}

async function attemptsOf(mockPay: MockPayContext, notificationId: string) {
  return mockPay.db
    .select()
    .from(providerDeliveryAttempt)
    .where(eq(providerDeliveryAttempt.notificationId, notificationId))
    .orderBy(providerDeliveryAttempt.startedAt);
}

/** A merchant endpoint that answers every delivery with `status` (and `headers`), counting what it got. */
async function answering(status: number, headers: Record<string, string> = {}) {
  const received: Record<string, string | string[] | undefined>[] = [];
  const server = createServer((req, res) => {
    received.push(req.headers);
    req.resume();
    req.on("end", () => {
      res.writeHead(status, headers);
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("MockPay signs as Standard Webhooks", () => {
  test("its signatures are the ones the spec's vectors hold, and the `standardwebhooks` package's own signer makes", () => {
    const keys = [
      { scheme: "v1" as const, secret: vectors.keys.secret },
      { scheme: "v1" as const, secret: vectors.keys.oldSecret },
      { scheme: "v1a" as const, secret: vectors.keys.secretKey },
    ];
    const valid = vectors.cases.filter((c) => c.expected === "valid");
    expect(valid.length).toBeGreaterThan(4);
    for (const vector of valid) {
      const id = vector.headers["webhook-id"] ?? "";
      const timestamp = Number(vector.headers["webhook-timestamp"]);
      const ours = keys.map((key) => standardSignature(id, timestamp, vector.payload, [key]));
      const given = (vector.headers["webhook-signature"] ?? "").split(" ");
      expect(given.some((one) => ours.includes(one))).toBe(true);
    }
    expect(publicKeyOf(vectors.keys.secretKey)).toBe(vectors.keys.publicKey);
    const at = new Date(1_796_472_000_000);
    expect(standardSignature("msg_1", 1_796_472_000, '{"a":1}', [{ scheme: "v1", secret: SECRET }])).toBe(
      new Webhook(SECRET).sign("msg_1", at, '{"a":1}'),
    );
  });

  test("10 first deliveries to a new endpoint at once: one endpoint, one key, and every one of them has it to sign with", async ({
    mockPay,
  }) => {
    const url = `http://127.0.0.1:9/new-${Date.now()}`;
    const keysSeen = await Promise.all(
      Array.from({ length: 10 }, () =>
        endpointFor(mockPay.db, mockPay.appId, url, { mode: "standard-v1", firstSecret: SECRET }).then(
          (endpoint) => signingKeys(mockPay.db, endpoint.id),
        ),
      ),
    );
    expect(keysSeen.map((keys) => keys.map((key) => key.secret))).toEqual(Array(10).fill([SECRET]));
    const [counts] = await mockPay.db.$client<{ endpoints: number; keys: number }[]>`
      SELECT count(DISTINCT e.id)::int AS endpoints, count(k.id)::int AS keys
        FROM provider_endpoint e LEFT JOIN provider_endpoint_key k ON k.endpoint_id = e.id WHERE e.url = ${url}`;
    expect(counts).toEqual({ endpoints: 1, keys: 1 });
  });

  test("v1 end to end: the merchant verifies with its secret and applies the payment; webhook-id is the notification's id on every attempt", async ({
    app,
    mockPay,
  }) => {
    app.payments.standardWebhooks = { secrets: [SECRET], publicKeys: [] };
    const endpoint = await theEndpoint(app, mockPay);
    expect(endpoint.format).toBe("standard");
    const paid = await paidAtMockPay(app, mockPay);
    await deliverAll(mockPay);
    expect(await paymentStatus(app, paid.outTradeNo)).toBe("SUCCESS");
    const attempts = await attemptsOf(mockPay, paid.notificationId);
    expect(attempts.length).toBeGreaterThanOrEqual(2); // two copies at once, one more after success
    expect(attempts.every((a) => a.httpStatus === 200 && a.ok)).toBe(true);
    const received = await app.db.$client<{ delivery_id: string }[]>`
      SELECT delivery_id FROM payment_notification WHERE out_trade_no = ${paid.outTradeNo}`;
    expect(new Set(received.map((r) => r.delivery_id))).toEqual(new Set([paid.notificationId]));
  });

  test("a tampered signature or a stale timestamp is refused by the merchant (401), and changes nothing", async ({
    app,
    mockPay,
  }) => {
    app.payments.standardWebhooks = { secrets: [SECRET], publicKeys: [] };
    await theEndpoint(app, mockPay);
    const paid = await paidAtMockPay(app, mockPay);
    for (const action of ["TAMPERED_SIGNATURE", "STALE_TIMESTAMP"] as const) {
      const [result] = await runAdminAction(
        mockPay.db,
        mockPay.appId,
        paid.outTradeNo,
        { action, count: 1, delayS: 30, notificationId: paid.notificationId },
        mockPay.delivery,
      );
      expect(result?.httpStatus).toBe(401);
    }
    expect(await paymentStatus(app, paid.outTradeNo)).toBe("PENDING");
    await deliverAll(mockPay);
    expect(await paymentStatus(app, paid.outTradeNo)).toBe("SUCCESS");
  });

  test("a rotation signs with both keys for the overlap: a merchant holding either accepts; after it, only the new key", async ({
    app,
    mockPay,
  }) => {
    const endpoint = await theEndpoint(app, mockPay);
    const { key } = await rotateEndpointKey(mockPay.db, endpoint.id, 2);
    expect(key.secret).toMatch(/^whsec_/);
    expect(key.secret).not.toBe(SECRET);
    // Within the overlap: each delivery carries two v1 signatures; either key alone verifies it.
    for (const secrets of [[SECRET], [key.secret]]) {
      app.payments.standardWebhooks = { secrets, publicKeys: [] };
      const paid = await paidAtMockPay(app, mockPay);
      await deliverAll(mockPay);
      expect(await paymentStatus(app, paid.outTradeNo)).toBe("SUCCESS");
    }
    // The old key retires at the end of the overlap: a merchant that never took up the new one refuses.
    await mockPay.db
      .$client`UPDATE provider_endpoint_key SET retires_at = now() WHERE retires_at IS NOT NULL`;
    app.payments.standardWebhooks = { secrets: [SECRET], publicKeys: [] };
    const late = await paidAtMockPay(app, mockPay);
    await deliverDueNotifications(mockPay.db, mockPay.delivery);
    expect((await attemptsOf(mockPay, late.notificationId)).map((a) => a.httpStatus)).toContain(401);
    expect(await paymentStatus(app, late.outTradeNo)).toBe("PENDING");
    app.payments.standardWebhooks = { secrets: [key.secret], publicKeys: [] };
    await mockPay.db
      .$client`UPDATE provider_notification SET next_attempt_at = now() WHERE id = ${late.notificationId}`;
    await deliverAll(mockPay);
    expect(await paymentStatus(app, late.outTradeNo)).toBe("SUCCESS");
  });

  test("v1a: switched to ed25519, MockPay makes a key pair; the merchant holding only the whpk_ public key accepts", async ({
    app,
    mockPay,
  }) => {
    const endpoint = await theEndpoint(app, mockPay);
    const { key } = await setEndpointMode(mockPay.db, endpoint.id, "standard-v1a");
    expect(key?.publicKey).toMatch(/^whpk_/);
    app.payments.standardWebhooks = { secrets: [], publicKeys: [key?.publicKey ?? ""] };
    const paid = await paidAtMockPay(app, mockPay);
    await deliverAll(mockPay);
    expect(await paymentStatus(app, paid.outTradeNo)).toBe("SUCCESS");
    // Its v1 secrets retired with the switch: a merchant holding only those refuses what comes now.
    app.payments.standardWebhooks = { secrets: [SECRET], publicKeys: [] };
    const next = await paidAtMockPay(app, mockPay);
    await deliverDueNotifications(mockPay.db, mockPay.delivery);
    expect((await attemptsOf(mockPay, next.notificationId)).every((a) => a.httpStatus === 401)).toBe(true);
    app.payments.standardWebhooks = { secrets: [], publicKeys: [key?.publicKey ?? ""] };
    await mockPay.db
      .$client`UPDATE provider_notification SET next_attempt_at = now() WHERE id = ${next.notificationId}`;
    await deliverAll(mockPay);
    expect(await paymentStatus(app, next.outTradeNo)).toBe("SUCCESS");
    await setEndpointMode(mockPay.db, endpoint.id, "standard-v1");
  });
});

describe("MockPay delivers as Standard Webhooks asks", () => {
  /** MockPay sending to `url` as a Standard Webhooks endpoint, at time scale 0.01 (5 s is 50 ms). */
  function sender(mockPay: MockPayContext): DeliveryDeps {
    return {
      ...mockPay.delivery,
      timeScale: 0.01,
      sendDuplicates: false,
      endpoints: { mode: "standard-v1", firstSecret: SECRET },
    };
  }

  /** A paid trade whose notifications go to `url` instead of the merchant. */
  async function tradeFor(app: AppContext, mockPay: MockPayContext, url: string) {
    const paid = await paidAtMockPay(app, mockPay);
    await mockPay.db
      .$client`UPDATE provider_trade SET notify_url = ${url} WHERE out_trade_no = ${paid.outTradeNo}`;
    return paid;
  }

  async function nextAttemptInMs(mockPay: MockPayContext, notificationId: string) {
    const [row] = await mockPay.db.$client<{ ms: number; attempts: number; status: string }[]>`
      SELECT (extract(epoch FROM next_attempt_at - now()) * 1000)::int AS ms, attempts, status
        FROM provider_notification WHERE id = ${notificationId}`;
    if (!row) throw new Error("no notification");
    return row;
  }

  /** One delivery round for just this notification: it is made due, then the worker runs. */
  async function attemptNow(mockPay: MockPayContext, deps: DeliveryDeps, notificationId: string) {
    await mockPay.db
      .$client`UPDATE provider_notification SET next_attempt_at = now() WHERE id = ${notificationId}`;
    await deliverDueNotifications(mockPay.db, deps);
  }

  test("the spec's schedule (time-scaled): 5 s, 5 min, 30 min … 24 h after each failure, then it gives up", async ({
    app,
    mockPay,
  }) => {
    const hook = await answering(500);
    try {
      const paid = await tradeFor(app, mockPay, hook.url);
      const deps = sender(mockPay);
      for (const [i, delayS] of STANDARD_WEBHOOKS_SCHEDULE_S.entries()) {
        await attemptNow(mockPay, deps, paid.notificationId);
        const next = await nextAttemptInMs(mockPay, paid.notificationId);
        expect(next.attempts).toBe(i + 1);
        expect(next.ms).toBeGreaterThan(delayS * 10 - 200);
        expect(next.ms).toBeLessThanOrEqual(delayS * 10 + 50);
      }
      await attemptNow(mockPay, deps, paid.notificationId);
      expect((await nextAttemptInMs(mockPay, paid.notificationId)).status).toBe("GAVE_UP");
      expect(hook.received).toHaveLength(STANDARD_WEBHOOKS_SCHEDULE_S.length + 1);
      expect(hook.received.every((h) => h["webhook-id"] === paid.notificationId)).toBe(true);
    } finally {
      await hook.close();
    }
  });

  test("a 3xx is a failure: the redirect is not followed", async ({ app, mockPay }) => {
    const target = await answering(200);
    const hook = await answering(307, { location: target.url });
    try {
      const paid = await tradeFor(app, mockPay, hook.url);
      await attemptNow(mockPay, sender(mockPay), paid.notificationId);
      expect(target.received).toHaveLength(0);
      const [attempt] = await attemptsOf(mockPay, paid.notificationId);
      expect(attempt).toMatchObject({ httpStatus: 307, ok: false });
      expect((await nextAttemptInMs(mockPay, paid.notificationId)).status).toBe("PENDING");
    } finally {
      await hook.close();
      await target.close();
    }
  });

  test("410 Gone disables the endpoint: nothing is sent to it, even when due, until a person enables it", async ({
    app,
    mockPay,
  }) => {
    const hook = await answering(410);
    try {
      const paid = await tradeFor(app, mockPay, hook.url);
      const deps = sender(mockPay);
      await attemptNow(mockPay, deps, paid.notificationId);
      const [endpoint] = await mockPay.db
        .select()
        .from(providerEndpoint)
        .where(eq(providerEndpoint.url, hook.url));
      expect(endpoint).toMatchObject({
        status: "DISABLED",
        disabledReason: expect.stringMatching(/^410 Gone/),
      });
      await attemptNow(mockPay, deps, paid.notificationId);
      await attemptNow(mockPay, deps, paid.notificationId);
      expect(hook.received).toHaveLength(1);
      expect((await nextAttemptInMs(mockPay, paid.notificationId)).status).toBe("PENDING");
      await enableEndpoint(mockPay.db, endpoint?.id ?? "");
      await deliverDueNotifications(mockPay.db, deps);
      expect(hook.received).toHaveLength(2);
    } finally {
      await hook.close();
    }
  });

  for (const status of [429, 502, 504]) {
    test(`${status} with Retry-After slows the endpoint down: the next attempt waits for it (time-scaled)`, async ({
      app,
      mockPay,
    }) => {
      const hook = await answering(status, { "retry-after": "120" });
      try {
        const paid = await tradeFor(app, mockPay, hook.url);
        const deps = sender(mockPay);
        await attemptNow(mockPay, deps, paid.notificationId);
        // 120 s at scale 0.01 is 1.2 s, longer than the schedule's 5 s (50 ms).
        expect((await nextAttemptInMs(mockPay, paid.notificationId)).ms).toBeGreaterThan(1_000);
        const [endpoint] = await mockPay.db
          .select()
          .from(providerEndpoint)
          .where(eq(providerEndpoint.url, hook.url));
        expect(endpoint?.pausedUntil?.getTime()).toBeGreaterThan(Date.now() + 1_000);
        // Due or not, nothing goes to a paused endpoint.
        await attemptNow(mockPay, deps, paid.notificationId);
        expect(hook.received).toHaveLength(1);
      } finally {
        await hook.close();
      }
    });
  }

  test("Retry-After is seconds or an HTTP date; without one, a slow-down waits the schedule's first 5 s", () => {
    expect(retryAfterOf("120")).toBe(120_000);
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    expect(retryAfterOf(inAMinute)).toBeGreaterThan(58_000);
    expect(retryAfterOf(inAMinute)).toBeLessThanOrEqual(60_000);
    expect(retryAfterOf(null)).toBe(5_000);
    expect(retryAfterOf("soon")).toBe(5_000);
  });

  test("the legacy format is untouched: its own signature header, its schedule", async ({ app, mockPay }) => {
    const hook = await answering(500);
    try {
      const paid = await tradeFor(app, mockPay, hook.url);
      const { notification, trade } = await loadNotification(mockPay.db, paid.notificationId);
      await sendNotification(
        mockPay.db,
        notification,
        trade,
        { attemptNo: 0, kind: "MANUAL_RESEND" },
        {
          ...mockPay.delivery,
          endpoints: { mode: "legacy" },
        },
      );
      expect(hook.received[0]?.["provider-signature"]).toBeDefined();
      expect(hook.received[0]?.["webhook-id"]).toBeUndefined();
    } finally {
      await hook.close();
    }
  });
});
