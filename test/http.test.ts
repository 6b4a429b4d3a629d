import { randomUUID } from "node:crypto";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATIONS } from "~/server/all-operations";
import type { AnyOperation } from "~/server/operations";
import { reconcileWhenDue } from "~/server/reconciliation/reconcile";
import { signQuery, tradeQueryPath, verifyBodySignature } from "~/shared/provider-contract";
import {
  type AppServer,
  HttpShopper,
  startAppServer,
  TEST_SERVER_ADMIN_TOKEN,
  TEST_SERVER_WEBHOOK_SECRET,
} from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/** The Standard Webhooks secret the servers hold, as a provider that signs that way gave it. */
const STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/** The production server (scripts/serve.ts, the built app), two instances on two ports, one database. */
let t: TestDatabase;
let first: AppServer;
let second: AppServer;

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 2 });
  [first, second] = await Promise.all([
    startAppServer({ databaseUrl: t.url, env: { PROVIDER_STANDARD_WEBHOOK_SECRETS: STANDARD_SECRET } }),
    startAppServer({ databaseUrl: t.url, env: { PROVIDER_STANDARD_WEBHOOK_SECRETS: STANDARD_SECRET } }),
  ]);
});
afterAll(async () => {
  await Promise.all([first?.stop(), second?.stop()]);
  await t.drop();
});

async function ordersOf(shopper: HttpShopper) {
  const userId = shopper.sessionCookie.split("=")[1]?.split(".")[0] ?? "";
  const rows = await t.sql<{ id: string }[]>`SELECT id FROM orders WHERE user_id = ${userId}`;
  return rows.map((r) => r.id);
}

function checkAnswers(answers: Awaited<ReturnType<HttpShopper["mutation"]>>[]) {
  const orderIds = new Set<unknown>();
  for (const answer of answers) {
    if (answer.status === 200) orderIds.add(answer.body.result?.data.json.orderId);
    else {
      // The only other acceptable answer: still in progress, retry later with the same key.
      expect(answer.status).toBe(409);
      expect(answer.headers.get("retry-after")).toBeTruthy();
    }
  }
  return orderIds;
}

describe("over HTTP against the production server", () => {
  it("gives a first-time visitor a signed HttpOnly session cookie", async () => {
    const shopper = new HttpShopper(first.baseUrl);
    const page = await shopper.visit("/");
    expect(page.status).toBe(200);
    expect(page.headers.get("set-cookie")).toMatch(/^checkout_session=[0-9a-f-]{36}\.\d+\.[\w-]+;.*HttpOnly/);
  });

  it("makes one order from 50 concurrent HTTP copies of one request", async () => {
    const shopper = new HttpShopper(first.baseUrl);
    await shopper.visit("/");
    const input = { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] };
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => shopper.mutation("orders.create", input)),
    );
    const orderIds = checkAnswers(answers);
    expect(orderIds.size).toBe(1);
    expect(await ordersOf(shopper)).toEqual([...orderIds]);
  });

  it("makes one order when copies go to two app instances at once", async () => {
    const shopper = new HttpShopper(first.baseUrl);
    await shopper.visit("/");
    const input = { requestId: randomUUID(), items: [{ skuId: "SKU-ESPRESSO", quantity: 2 }] };
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        shopper.mutation("orders.create", input, i % 2 ? second.baseUrl : first.baseUrl),
      ),
    );
    const orderIds = checkAnswers(answers);
    expect(orderIds.size).toBe(1);
    expect(await ordersOf(shopper)).toEqual([...orderIds]);
    const [record] =
      await t.sql`SELECT status FROM idempotency_record WHERE idempotency_key = ${input.requestId}`;
    expect(record?.status).toBe("SUCCESS");
  });

  it("answers a payload mismatch with 422 and bad input with 400, writing nothing", async () => {
    const shopper = new HttpShopper(first.baseUrl);
    await shopper.visit("/");
    const requestId = randomUUID();
    await shopper.mutation("orders.create", { requestId, items: [{ skuId: "SKU-MUG", quantity: 1 }] });
    const mismatch = await shopper.mutation("orders.create", {
      requestId,
      items: [{ skuId: "SKU-MUG", quantity: 9 }],
    });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.error?.json.data.domainCode).toBe("IDEMPOTENCY_KEY_REUSED");
    const bad = await shopper.mutation("orders.create", { requestId: "x", items: [] });
    expect(bad.status).toBe(400);
    expect(bad.body.error?.json.message).toMatch(/requestId/);
    const notJson = await fetch(`${first.baseUrl}/api/trpc/orders.create`, {
      method: "POST",
      headers: { cookie: shopper.sessionCookie, "content-type": "application/json" },
      body: "{not json",
    });
    expect(notJson.status).toBe(400);
    expect(await ordersOf(shopper)).toHaveLength(1);
  });

  it("hides one shopper's order from another, and ignores a forged cookie", async () => {
    const alice = new HttpShopper(first.baseUrl);
    await alice.visit("/");
    const placed = await alice.mutation("orders.create", {
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const orderId = placed.body.result?.data.json.orderId;
    expect((await alice.query("orders.get", { orderId })).status).toBe(200);

    const bob = new HttpShopper(second.baseUrl);
    await bob.visit("/");
    expect((await bob.query("orders.get", { orderId })).status).toBe(404);

    const aliceId = alice.sessionCookie.split("=")[1]?.split(".")[0];
    const mallory = new HttpShopper(first.baseUrl);
    mallory.useCookie(`checkout_session=${aliceId}.forged-signature`);
    const stolen = await mallory.query("orders.get", { orderId });
    expect(stolen.status).toBe(404);
    expect(mallory.sessionCookie).not.toContain(aliceId);
  });
});

describe("provider-facing routes against the production server", () => {
  it("refuses unsigned or forged notifications and oversized bodies, changing nothing", async () => {
    const forged = await fetch(`${first.baseUrl}/api/payments/notify`, {
      method: "POST",
      headers: { "content-type": "application/json", "provider-signature": `t=1,v1=${"0".repeat(64)}` },
      body: JSON.stringify({ id: "evt_x", type: "payment.succeeded" }),
    });
    expect(forged.status).toBe(401);
    expect(await forged.json()).toMatchObject({ code: "FAIL" });
    const unsigned = await fetch(`${first.baseUrl}/api/payments/notify`, { method: "POST", body: "{}" });
    expect(unsigned.status).toBe(401);
    const huge = await fetch(`${first.baseUrl}/api/payments/notify`, {
      method: "POST",
      body: "x".repeat(70_000),
    });
    expect(huge.status).toBe(413);
    const [row] = await t.sql`SELECT count(*)::int AS n FROM payment_order WHERE status <> 'PENDING'`;
    expect(row?.n).toBe(0);
  });

  it("accepts a payment.succeeded signed by any conformant Standard Webhooks sender: the standardwebhooks package's signer, and svix's", async () => {
    const signers = {
      standardwebhooks: (id: string, at: Date, body: string) =>
        new StandardWebhook(STANDARD_SECRET).sign(id, at, body),
      svix: (id: string, at: Date, body: string) => new SvixWebhook(STANDARD_SECRET).sign(id, at, body),
    };
    for (const [name, sign] of Object.entries(signers)) {
      const shopper = new HttpShopper(first.baseUrl);
      const placed = await shopper.mutation("orders.create", {
        requestId: randomUUID(),
        items: [{ skuId: "SKU-MUG", quantity: 1 }],
      });
      const orderId = placed.body.result?.data.json.orderId;
      const payment = await shopper.mutation("payments.create", { orderId });
      const { outTradeNo, amountCents } = (payment.body.result?.data.json ?? {}) as {
        outTradeNo: string;
        amountCents: number;
      };
      const body = JSON.stringify({
        id: `evt_${randomUUID()}`,
        type: "payment.succeeded",
        app_id: "app_checkout_demo",
        out_trade_no: outTradeNo,
        transaction_id: `tx_${randomUUID()}`,
        amount_cents: amountCents,
        currency: "USD",
        created_at: new Date().toISOString(),
      });
      const id = `msg_${randomUUID()}`;
      const at = new Date();
      const deliver = (signature: string) =>
        fetch(`${second.baseUrl}/api/payments/notify`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "webhook-id": id,
            "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
            "webhook-signature": signature,
          },
          body,
        });
      const signature = sign(id, at, body);
      expect(signature, name).toMatch(/^v1,/);
      // Signed with another secret: refused, nothing applied.
      const forged = await deliver(
        new StandardWebhook("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").sign(id, at, body),
      );
      expect(forged.status, name).toBe(401);
      const accepted = await deliver(signature);
      expect({ name, status: accepted.status, body: await accepted.json() }).toEqual({
        name,
        status: 200,
        body: { code: "SUCCESS" },
      });
      const [row] = await t.sql`SELECT status FROM payment_order WHERE out_trade_no = ${outTradeNo}`;
      expect(row?.status, name).toBe("SUCCESS");
    }
  });

  it("answers the status query only when it is signed, and signs its answer", async () => {
    const path = tradeQueryPath("app_checkout_demo", "P_UNKNOWN");
    const unsigned = await fetch(`${first.baseUrl}${path}`);
    expect(unsigned.status).toBe(401);
    const nowS = Math.floor(Date.now() / 1000);
    const signed = await fetch(`${first.baseUrl}${path}`, {
      headers: { "provider-signature": signQuery(TEST_SERVER_WEBHOOK_SECRET, path, nowS) },
    });
    expect(signed.status).toBe(200);
    const body = await signed.text();
    expect(JSON.parse(body)).toMatchObject({ status: "NOT_FOUND", out_trade_no: "P_UNKNOWN" });
    expect(
      verifyBodySignature(
        "statusAnswer",
        TEST_SERVER_WEBHOOK_SECRET,
        body,
        signed.headers.get("provider-signature"),
        nowS,
        300,
      ),
    ).toBe("OK");
  });
});

describe("operator pages", () => {
  it("answer 401 without the admin token, and open with it", async () => {
    for (const path of ["/admin", "/provider/admin"]) {
      expect((await fetch(`${first.baseUrl}${path}`)).status).toBe(401);
      expect((await fetch(`${first.baseUrl}${path}?token=wrong-token`, { redirect: "manual" })).status).toBe(
        401,
      );
      const withToken = await fetch(`${first.baseUrl}${path}?token=${TEST_SERVER_ADMIN_TOKEN}`, {
        redirect: "manual",
      });
      expect(withToken.status).toBe(303);
      expect(withToken.headers.get("set-cookie")).toContain("admin_token=");
      const bearer = await fetch(`${first.baseUrl}${path}`, {
        headers: { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` },
      });
      expect(bearer.status).toBe(200);
    }
    const action = await fetch(`${first.baseUrl}/provider/api/admin/trades/P_X`, {
      method: "POST",
      body: new URLSearchParams({ action: "RESEND" }),
    });
    expect(action.status).toBe(401);
    const retry = await fetch(`${first.baseUrl}/api/admin/jobs/1/retry`, { method: "POST" });
    expect(retry.status).toBe(401);
    expect((await fetch(`${first.baseUrl}/api/metrics`)).status).toBe(401);
    const metrics = await fetch(`${first.baseUrl}/api/metrics`, {
      headers: { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` },
    });
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).toContain("checkout_idempotent_requests_total");
    expect(text).toContain("checkout_reconciliation_violations");
    // The process's runtime too (the bench reads it round by round): event-loop delay and GC pauses.
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds \d/m);
    expect(text).toContain("nodejs_gc_duration_seconds_sum");
  });

  it("MockPay's endpoint console: admin only, a clear refusal for a bad id or form, and a switch that says what to give the merchant", async () => {
    const admin = { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` };
    const [endpoint] = await t.sql<{ id: string }[]>`
      INSERT INTO provider_endpoint (app_id, url) VALUES ('app_http', 'http://127.0.0.1:9/hook') RETURNING id`;
    const at = (id: string) => `${first.baseUrl}/provider/api/admin/endpoints/${id}`;
    const post = (id: string, form: Record<string, string>, headers: Record<string, string> = admin) =>
      fetch(at(id), { method: "POST", body: new URLSearchParams(form), headers, redirect: "manual" });
    expect((await post(endpoint?.id ?? "", { action: "ENABLE" }, {})).status).toBe(401);
    expect((await post("not-a-uuid", { action: "ENABLE" })).status).toBe(404);
    const badForm = await post(endpoint?.id ?? "", { action: "MODE", mode: "xml" });
    expect(badForm.status).toBe(303);
    expect(decodeURIComponent(badForm.headers.get("location") ?? "")).toContain("invalid action");
    const rotateLegacy = await post(endpoint?.id ?? "", { action: "ROTATE" });
    expect(decodeURIComponent(rotateLegacy.headers.get("location") ?? "")).toContain(
      "only a Standard Webhooks endpoint has a key to rotate",
    );
    const switched = await post(endpoint?.id ?? "", { action: "MODE", mode: "standard-v1a" });
    expect(decodeURIComponent(switched.headers.get("location") ?? "")).toMatch(
      /now standard-v1a; give the merchant whpk_/,
    );
    const [row] = await t.sql`SELECT format FROM provider_endpoint WHERE id = ${endpoint?.id ?? ""}`;
    expect(row?.format).toBe("standard");
    const page = await fetch(`${first.baseUrl}/provider/admin`, { headers: admin });
    expect(await page.text()).toContain("http://127.0.0.1:9/hook");
  });

  it("shows the last reconciliation kept on /admin (a view never runs one), and queues one on Reconcile now", async () => {
    const admin = { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` };
    const view = async () => (await fetch(`${first.baseUrl}/admin`, { headers: admin })).text();
    expect(await view()).toContain("No reconciliation kept yet");
    // What an event worker does (this server runs none).
    const periods = { everyMin: 1_000_000, fullEveryMin: 1_000_000 };
    expect((await reconcileWhenDue(t.db, periods))?.kind).toBe("full");
    expect(await view()).toMatch(/No violation · every order · checked/);

    const queued = await fetch(`${first.baseUrl}/api/admin/reconciliation`, {
      method: "POST",
      headers: admin,
      redirect: "manual",
    });
    expect(queued.status).toBe(303);
    expect(await view()).toContain("Reconciliation queued");
    expect((await reconcileWhenDue(t.db, periods))?.kind).toBe("requested");
    const page = await view();
    expect(page).toMatch(/No violation · every order, as asked · checked/);
    expect(page).toContain("Reconcile now");
  });
});

describe("REST API against the production server", () => {
  it("serves the OpenAPI document and refuses requests without a token", async () => {
    const doc = await fetch(`${first.baseUrl}/api/v1/openapi.json`);
    expect(doc.status).toBe(200);
    expect(await doc.json()).toMatchObject({ openapi: "3.1.0" });
    const anonymous = await fetch(`${first.baseUrl}/api/v1/orders`, {
      method: "POST",
      headers: { "idempotency-key": randomUUID(), "content-type": "application/json" },
      body: JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 1 }] }),
    });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("content-type")).toBe("application/problem+json");
  });

  it("answers each problem type's URI with a page that says what it means and what to do; an unknown one is 404", async () => {
    const refused = await fetch(`${first.baseUrl}/api/v1/orders`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    const { type } = (await refused.json()) as { type: string };
    expect(type).toMatch(/^\/problems\//);
    for (const path of [type, "/problems/idempotency-key-reused", "/problems/out-of-stock"]) {
      const page = await fetch(new URL(path, first.baseUrl));
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain("What it means");
      expect(html).toContain("What to do");
    }
    expect(await (await fetch(`${first.baseUrl}/problems/idempotency-key-reused`)).text()).toContain(
      "IDEMPOTENCY_KEY_REUSED",
    );
    expect((await fetch(`${first.baseUrl}/problems/no-such-problem`)).status).toBe(404);
    const index = await (await fetch(`${first.baseUrl}/problems`)).text();
    expect(index).toContain('href="/problems/request-in-progress"');
  });

  it("publishes its idempotency policy (the IETF draft asks for it), made from the operations it mounts", async () => {
    const answer = await fetch(`${first.baseUrl}/api/v1/idempotency-policy`);
    expect(answer.status).toBe(200);
    const policy = (await answer.json()) as {
      header: string;
      expiresAfterSeconds: number;
      key: { pattern: string };
      operations: { operation: string; method: string; path: string; storedRefusals: { code: string }[] }[];
    };
    expect(policy.header).toBe("Idempotency-Key");
    // IDEMPOTENCY_TTL_HOURS' default, as the server runs it.
    expect(policy.expiresAfterSeconds).toBe(24 * 3600);
    expect(new RegExp(policy.key.pattern).test(randomUUID())).toBe(true);
    const mounted = (OPERATIONS as readonly AnyOperation[]).filter((op) => op.rest);
    expect(policy.operations.map((o) => o.operation).sort()).toEqual(mounted.map((op) => op.name).sort());
    expect(policy.operations.find((o) => o.operation === "order.create")).toMatchObject({
      method: "POST",
      path: "/api/v1/orders",
      storedRefusals: expect.arrayContaining([expect.objectContaining({ code: "OUT_OF_STOCK" })]),
    });
    const doc = (await (await fetch(`${first.baseUrl}/api/v1/openapi.json`)).json()) as { paths: object };
    expect(Object.keys(doc.paths)).toContain("/api/v1/idempotency-policy");
  });

  it("makes one order from 20 concurrent keyed POSTs split over two instances", async () => {
    const { token } = (await (await fetch(`${first.baseUrl}/api/v1/tokens`, { method: "POST" })).json()) as {
      token: string;
    };
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${i % 2 ? second.baseUrl : first.baseUrl}/api/v1/orders`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "idempotency-key": key,
            "content-type": "application/json",
          },
          body: JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 1 }] }),
        }),
      ),
    );
    const created = answers.filter((a) => a.status === 201);
    expect(answers.every((a) => a.status === 201 || a.status === 409)).toBe(true);
    expect(created.filter((a) => a.headers.get("idempotent-replayed") !== "true")).toHaveLength(1);
    const locations = new Set(created.map((a) => a.headers.get("location")));
    expect(locations.size).toBe(1);
    const userId = token.slice(3).split(".")[0] ?? "";
    const [row] = await t.sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`;
    expect(row?.n).toBe(1);
  });

  it("spends one coupon once when different intents race over two instances, over tRPC and REST", async () => {
    const { token } = (await (await fetch(`${first.baseUrl}/api/v1/tokens`, { method: "POST" })).json()) as {
      token: string;
    };
    const userId = token.slice(3).split(".")[0] ?? "";
    const code = `THANKS-${randomUUID().slice(0, 8).toUpperCase()}`;
    // The coupon a paid order earned (the benefits consumer's grant).
    await t.sql`
      WITH earned AS (
        INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, status)
        VALUES (${userId}, ${randomUUID()}, 'test', 1250, 'SHIPPED')
        RETURNING id)
      INSERT INTO benefit_grant (order_id, user_id, benefit_type, amount, code)
      SELECT id, ${userId}, 'COUPON', 500, ${code} FROM earned`;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${i % 2 ? second.baseUrl : first.baseUrl}/api/v1/orders`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "idempotency-key": randomUUID(),
            "content-type": "application/json",
          },
          body: JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 1 }], couponCode: code }),
        }),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(19);
    const refused = (await answers.find((a) => a.status === 412)?.json()) as { code: string };
    expect(refused.code).toBe("COUPON_ALREADY_USED");
    const placed = (await answers.find((a) => a.status === 201)?.json()) as {
      amountCents: number;
      discountCents: number;
    };
    expect(placed).toMatchObject({ amountCents: 750, discountCents: 500 });
    const [row] = await t.sql`
      SELECT count(*)::int AS orders, count(*) FILTER (WHERE discount_cents > 0)::int AS discounted,
             (SELECT count(*)::int FROM coupon_redemption WHERE code = ${code}) AS redemptions
        FROM orders WHERE user_id = ${userId} AND status = 'PENDING_PAYMENT'`;
    expect(row).toEqual({ orders: 1, discounted: 1, redemptions: 1 });
  });
});
