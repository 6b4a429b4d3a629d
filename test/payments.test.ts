import { sign as cryptoSign, generateKeyPairSync, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type AdminActionInput, runAdminAction } from "~/mockpay/server/admin";
import type { MockPayContext } from "~/mockpay/server/context";
import { deliverDueNotifications } from "~/mockpay/server/delivery";
import { answerStatusQuery } from "~/mockpay/server/query-api";
import { cancelTrade, confirmTrade, openTrade } from "~/mockpay/server/trades";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import type { AppContext } from "~/server/app-context";
import { createOrder } from "~/server/orders/create-order";
import { createPayment } from "~/server/payments/create-payment";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { RefusalTally } from "~/server/payments/refused-notifications";
import { syncPaymentStatus, syncStalePayments } from "~/server/payments/status-query";
import { reconcile } from "~/server/reconciliation/reconcile";
import { createCaller } from "~/server/trpc/root";
import { type NotificationBody, payRequestSchema, signBody } from "~/shared/provider-contract";
import { TEST_APP_ID, TEST_WEBHOOK_SECRET } from "./support/app-context";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";

let t: TestDatabase;
let app: AppContext;
let mockPay: MockPayContext;

// The database and the app's dependencies come from the file's fixtures (test/support/fixtures.ts).
test.beforeAll(({ database, app: wired, mockPay: wiredMockPay }) => {
  t = database;
  app = wired;
  mockPay = wiredMockPay;
});

async function pendingPayment(quantity = 2) {
  const userId = randomUUID();
  const order = await createOrder(t.db, userId, {
    requestId: randomUUID(),
    items: [{ skuId: "SKU-MUG", quantity }],
  });
  const payment = await createPayment(t.db, userId, { orderId: order.orderId }, app.payments);
  return { userId, order, payment };
}

function successBody(outTradeNo: string, amountCents: number, overrides: Partial<NotificationBody> = {}) {
  return {
    id: `evt_${randomUUID()}`,
    type: "payment.succeeded",
    app_id: TEST_APP_ID,
    out_trade_no: outTradeNo,
    transaction_id: `T${randomUUID().slice(0, 8)}`,
    amount_cents: amountCents,
    currency: "USD",
    created_at: new Date().toISOString(),
    ...overrides,
  } satisfies NotificationBody;
}

function deliver(body: unknown, options: { secret?: string; timestampS?: number; raw?: string } = {}) {
  const raw = options.raw ?? JSON.stringify(body);
  const signature = signBody(
    "notification",
    options.secret ?? TEST_WEBHOOK_SECRET,
    raw,
    options.timestampS ?? Math.floor(Date.now() / 1000),
  );
  return handlePaymentNotification(t.db, { body: raw, signature, deliveryId: randomUUID() }, app.payments);
}

/** What the provider's pay page does when the shopper's browser arrives with the merchant's link. */
function openFromPayUrl(payUrl: string) {
  const { sig, ...request } = payRequestSchema.parse(
    Object.fromEntries(new URL(payUrl, "http://x").searchParams),
  );
  return openTrade(mockPay.db, request, sig, TEST_WEBHOOK_SECRET);
}

async function state(orderId: string) {
  const [row] = await t.sql<
    { order_status: string; payments: number; successes: number; events: number; processed: number }[]
  >`
    SELECT (SELECT status FROM orders WHERE id = ${orderId}) AS order_status,
           (SELECT count(*)::int FROM payment_order WHERE order_id = ${orderId}) AS payments,
           (SELECT count(*)::int FROM payment_order WHERE order_id = ${orderId} AND status = 'SUCCESS') AS successes,
           (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${orderId}::text AND event_type = 'OrderPaid') AS events,
           (SELECT count(*)::int FROM payment_notification n JOIN payment_order p ON p.out_trade_no = n.out_trade_no
             WHERE p.order_id = ${orderId} AND n.outcome = 'PROCESSED') AS processed`;
  return row;
}

describe("payment notifications (merchant side)", () => {
  it("turns 20 identical notifications at once into one payment, one paid order and one event", async () => {
    const { userId, order, payment } = await pendingPayment();
    const body = successBody(payment.outTradeNo, payment.amountCents);
    const answers = await Promise.all(Array.from({ length: 20 }, () => deliver(body)));
    expect(answers.every((a) => a.httpStatus === 200 && a.body.code === "SUCCESS")).toBe(true);
    expect(await state(order.orderId)).toEqual({
      order_status: "PAID",
      payments: 1,
      successes: 1,
      events: 1,
      processed: 1,
    });
    const outcomes = await t.sql`
      SELECT outcome, count(*)::int AS n FROM payment_notification
       WHERE out_trade_no = ${payment.outTradeNo} GROUP BY outcome ORDER BY outcome`;
    expect(outcomes.map((r) => [r.outcome, r.n])).toEqual([
      ["DUPLICATE", 19],
      ["PROCESSED", 1],
    ]);
    const [event] = await t.sql`
      SELECT user_id, event_type, aggregate_type, dedupe_key, payload FROM outbox_event WHERE aggregate_id = ${order.orderId}`;
    // The whole event, as its consumers read it.
    expect(event).toEqual({
      user_id: userId,
      event_type: "OrderPaid",
      aggregate_type: "order",
      dedupe_key: `OrderPaid:${order.orderId}`,
      payload: {
        orderId: order.orderId,
        userId,
        amountCents: 2500,
        currency: payment.currency,
        outTradeNo: payment.outTradeNo,
        transactionId: body.transaction_id,
      },
    });
  });

  it("answers a copy of a success it already holds in one statement, as the transaction would", async () => {
    const { order, payment } = await pendingPayment();
    const body = successBody(payment.outTradeNo, payment.amountCents);
    // Two copies at once: both may go through the transaction (one applies it, one is its duplicate).
    await Promise.all([deliver(body), deliver(body)]);
    const transaction = vi.spyOn(t.db, "transaction");
    try {
      const later = await deliver({ ...body, id: `evt_${randomUUID()}` });
      expect(later).toMatchObject({ httpStatus: 200, body: { code: "SUCCESS" } });
      expect(transaction).not.toHaveBeenCalled();
      // Not the fact it holds (another transaction id, another amount): the transaction decides, as before.
      const other = await deliver({ ...body, transaction_id: `T${randomUUID().slice(0, 8)}` });
      const wrong = await deliver({ ...body, amount_cents: body.amount_cents + 1 });
      expect(transaction).toHaveBeenCalledTimes(2);
      expect([other.httpStatus, wrong.httpStatus]).toEqual([200, 400]);
    } finally {
      transaction.mockRestore();
    }
    const rows = await t.sql`
      SELECT outcome, detail, alert, http_status FROM payment_notification
       WHERE out_trade_no = ${payment.outTradeNo} ORDER BY id`;
    const [, inTransaction, inOneStatement] = rows;
    expect(inOneStatement).toEqual(inTransaction);
    expect(inOneStatement).toMatchObject({ outcome: "DUPLICATE", alert: false, http_status: 200 });
    expect(rows.slice(3).map((r) => [r.outcome, r.alert])).toEqual([
      ["DUPLICATE", true],
      ["AMOUNT_MISMATCH", true],
    ]);
    expect(await state(order.orderId)).toMatchObject({ successes: 1, events: 1, processed: 1 });
  });

  it("applies a notification signed as Standard Webhooks (v1 or v1a), refuses one that is not, dedupes on webhook-id", async () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const { publicKey, privateKey } = generateKeyPairSync("ed25519");
    const raw = Buffer.from(publicKey.export({ format: "jwk" }).x ?? "", "base64url").toString("base64");
    const refusals = new RefusalTally();
    const deps = {
      ...app.payments,
      refusals,
      standardWebhooks: { secrets: [secret], publicKeys: [`whpk_${raw}`] },
    };
    const send = (body: unknown, scheme: "v1" | "v1a", tamper = false) => {
      const text = JSON.stringify(body);
      const id = `msg_${randomUUID()}`;
      const timestamp = new Date();
      const ts = String(Math.floor(timestamp.getTime() / 1000));
      const signature =
        scheme === "v1"
          ? new Webhook(secret).sign(id, timestamp, text)
          : `v1a,${cryptoSign(null, Buffer.from(`${id}.${ts}.${text}`), privateKey).toString("base64")}`;
      const delivery = {
        body: tamper ? text.replace("2500", "2501") : text,
        signature: null,
        deliveryId: id,
        standard: { id, timestamp: ts, signature },
      };
      return handlePaymentNotification(t.db, delivery, deps).then((answer) => ({
        ...answer,
        // The same delivery again (the provider retries with the same webhook-id and signature).
        again: () => handlePaymentNotification(t.db, delivery, deps),
      }));
    };
    for (const scheme of ["v1", "v1a"] as const) {
      const { order, payment } = await pendingPayment();
      const body = successBody(payment.outTradeNo, payment.amountCents);
      expect((await send(body, scheme, true)).httpStatus).toBe(401);
      const applied = await send(body, scheme);
      expect(applied).toMatchObject({ httpStatus: 200, body: { code: "SUCCESS" } });
      expect(await applied.again()).toMatchObject({ httpStatus: 200, body: { code: "SUCCESS" } });
      expect(await state(order.orderId)).toMatchObject({
        order_status: "PAID",
        successes: 1,
        events: 1,
        processed: 1,
      });
      const recorded = await t.sql`
        SELECT outcome, delivery_id FROM payment_notification WHERE out_trade_no = ${payment.outTradeNo} ORDER BY id`;
      expect(recorded.map((r) => r.outcome)).toEqual(["PROCESSED", "DUPLICATE"]);
      expect(recorded[0]?.delivery_id).toMatch(/^msg_/);
    }
    // No Standard Webhooks key configured: refused as unsigned, whatever it carries.
    const { payment } = await pendingPayment();
    const body = JSON.stringify(successBody(payment.outTradeNo, payment.amountCents));
    const now = String(Math.floor(Date.now() / 1000));
    const unsigned = await handlePaymentNotification(
      t.db,
      {
        body,
        signature: null,
        deliveryId: "msg_x",
        standard: { id: "msg_x", timestamp: now, signature: "v1,AAAA" },
      },
      { ...deps, standardWebhooks: { secrets: [], publicKeys: [] } },
    );
    expect(unsigned.httpStatus).toBe(401);
    expect(await refusals.flush(t.db)).toEqual({ BAD_SIGNATURE: 2, UNSIGNED: 1 });
  });

  it.each([
    ["a tampered signature", "BAD_SIGNATURE", { secret: "whsec_someone_else_entirely" }],
    ["a stale timestamp", "STALE_TIMESTAMP", { timestampS: Math.floor(Date.now() / 1000) - 3600 }],
    ["a timestamp from the future", "STALE_TIMESTAMP", { timestampS: Math.floor(Date.now() / 1000) + 3600 }],
  ])(
    "answers %s with 401, changes nothing, and only counts it: no stored fact, no link to the payment",
    async (_name, reason, options) => {
      const { order, payment } = await pendingPayment();
      const storedBefore = await t.sql`SELECT count(*)::int AS n FROM payment_notification`;
      const answer = await deliver(successBody(payment.outTradeNo, payment.amountCents), options);
      expect(answer.httpStatus).toBe(401);
      expect(answer.body.code).toBe("FAIL");
      expect(await state(order.orderId)).toMatchObject({
        order_status: "PENDING_PAYMENT",
        successes: 0,
        events: 0,
      });
      expect(await t.sql`SELECT count(*)::int AS n FROM payment_notification`).toEqual(storedBefore);
      expect(await app.payments.refusals.flush(t.db)).toEqual({ [reason]: 1 });
    },
  );

  it("answers an unsigned notification 401 and a signed body that is not a notification 400 (that one is a verified fact)", async () => {
    const { payment } = await pendingPayment();
    const unsigned = await handlePaymentNotification(
      t.db,
      {
        body: JSON.stringify(successBody(payment.outTradeNo, payment.amountCents)),
        signature: null,
        deliveryId: null,
      },
      app.payments,
    );
    expect(unsigned.httpStatus).toBe(401);
    expect(await app.payments.refusals.flush(t.db)).toEqual({ UNSIGNED: 1 });
    const malformed = await deliver(null, { raw: "{oops" });
    expect(malformed.httpStatus).toBe(400);
    const [logged] = await t.sql`SELECT outcome FROM payment_notification ORDER BY id DESC LIMIT 1`;
    expect(logged?.outcome).toBe("MALFORMED");
  });

  it("keeps 1,000 forged notifications to one row per minute and reason, and raises no alert while real ones pass", async () => {
    const { payment } = await pendingPayment();
    const body = JSON.stringify(successBody(payment.outTradeNo, payment.amountCents));
    const forged = signBody("notification", "whsec_a_forger_guessing", body, Math.floor(Date.now() / 1000));
    await t.sql`DELETE FROM refused_notification`;
    await Promise.all(
      Array.from({ length: 1_000 }, (_, i) =>
        handlePaymentNotification(
          t.db,
          { body, signature: i % 2 ? forged : null, deliveryId: null },
          app.payments,
        ),
      ),
    );
    await app.payments.refusals.flush(t.db);
    const rows = await t.sql<{ reason: string; count: number }[]>`
      SELECT reason, count FROM refused_notification ORDER BY reason`;
    expect(rows.length).toBeLessThanOrEqual(4); // two reasons, at most two minutes
    const total = (reason: string) =>
      rows.filter((r) => r.reason === reason).reduce((sum, r) => sum + r.count, 0);
    expect([total("BAD_SIGNATURE"), total("UNSIGNED")]).toEqual([500, 500]);
    // A verified notification in the same 10 minutes: the forgeries are a figure, not an alert.
    await deliver(successBody(payment.outTradeNo, payment.amountCents));
    const figures = await opsFigures(t.db);
    expect(figures.signatureFailures10m).toBeGreaterThanOrEqual(1_000);
    expect(alertsFrom(figures).map((a) => a.name)).not.toContain("signature_failures");
    // None verified: the provider's own may be failing (a wrong secret), and a person is told.
    expect(alertsFrom({ ...figures, verifiedNotifications10m: 0 }).map((a) => a.name)).toContain(
      "signature_failures",
    );
  });

  it("refuses a wrong amount as an alert, a wrong app and an unknown payment, changing nothing", async () => {
    const { order, payment } = await pendingPayment();
    const wrongAmount = await deliver(successBody(payment.outTradeNo, payment.amountCents + 1));
    expect(wrongAmount.httpStatus).toBe(400);
    const wrongCurrency = await deliver(
      successBody(payment.outTradeNo, payment.amountCents, { currency: "EUR" }),
    );
    expect(wrongCurrency.httpStatus).toBe(400);
    const wrongApp = await deliver(
      successBody(payment.outTradeNo, payment.amountCents, { app_id: "app_other" }),
    );
    expect(wrongApp.httpStatus).toBe(400);
    const unknown = await deliver(successBody("P_DOES_NOT_EXIST", payment.amountCents));
    expect(unknown.httpStatus).toBe(404);
    expect(await state(order.orderId)).toMatchObject({
      order_status: "PENDING_PAYMENT",
      successes: 0,
      events: 0,
    });
    const alerts = await t.sql`
      SELECT outcome FROM payment_notification WHERE out_trade_no = ${payment.outTradeNo} AND alert ORDER BY id`;
    expect(alerts.map((r) => r.outcome)).toEqual(["AMOUNT_MISMATCH", "AMOUNT_MISMATCH"]);
  });

  it("refuses a success naming another payment's transaction id with 409 and an alert, also when both race", async () => {
    const paid = await pendingPayment();
    const transaction_id = `T-${randomUUID()}`;
    expect(
      (await deliver(successBody(paid.payment.outTradeNo, paid.payment.amountCents, { transaction_id })))
        .httpStatus,
    ).toBe(200);
    const other = await pendingPayment();
    const clash = await deliver(
      successBody(other.payment.outTradeNo, other.payment.amountCents, { transaction_id }),
    );
    expect(clash.httpStatus).toBe(409);
    expect(await state(other.order.orderId)).toMatchObject({
      order_status: "PENDING_PAYMENT",
      successes: 0,
      events: 0,
    });
    const [recorded] = await t.sql`
      SELECT outcome, alert FROM payment_notification WHERE out_trade_no = ${other.payment.outTradeNo}`;
    expect(recorded).toEqual({ outcome: "TRANSACTION_CLASH", alert: true });
    expect(alertsFrom(await opsFigures(t.db)).map((alert) => alert.name)).toContain("transaction_clash");

    // Two pending payments, one transaction id, at the same moment: one wins, the other is the clash (never a 500).
    const [left, right] = await Promise.all([pendingPayment(), pendingPayment()]);
    const raced = `T-${randomUUID()}`;
    const answers = await Promise.all(
      [left, right].flatMap(({ payment }) =>
        Array.from({ length: 5 }, () =>
          deliver(successBody(payment.outTradeNo, payment.amountCents, { transaction_id: raced })),
        ),
      ),
    );
    expect(answers.map((answer) => answer.httpStatus).sort()).toEqual([
      ...Array(5).fill(200),
      ...Array(5).fill(409),
    ]);
  });

  it("does not let a late payment.closed undo a success", async () => {
    const { order, payment } = await pendingPayment();
    const paid = successBody(payment.outTradeNo, payment.amountCents);
    await deliver(paid);
    const closed = await deliver({ ...paid, id: `evt_${randomUUID()}`, type: "payment.closed" });
    expect(closed).toMatchObject({ httpStatus: 200, body: { code: "SUCCESS" } });
    expect(await state(order.orderId)).toMatchObject({ order_status: "PAID", successes: 1, events: 1 });
  });

  it("lets the provider's success win over a close that overtook it, once, when the order still awaits payment", async () => {
    const { order, payment } = await pendingPayment();
    const paid = successBody(payment.outTradeNo, payment.amountCents);
    // Crossed notifications: the late close arrives first, then ten copies of the success at once.
    await deliver({ ...paid, id: `evt_${randomUUID()}`, type: "payment.closed" });
    const answers = await Promise.all(Array.from({ length: 10 }, () => deliver(paid)));
    expect(answers.every((a) => a.httpStatus === 200)).toBe(true);
    expect(await state(order.orderId)).toMatchObject({ order_status: "PAID", successes: 1, events: 1 });
  });

  it("closes a pending payment; the shopper can then pay with a new one", async () => {
    const { userId, order, payment } = await pendingPayment();
    const closed = await deliver(
      successBody(payment.outTradeNo, payment.amountCents, { type: "payment.closed" }),
    );
    expect(closed.httpStatus).toBe(200);
    const [row] = await t.sql`SELECT status FROM payment_order WHERE out_trade_no = ${payment.outTradeNo}`;
    expect(row?.status).toBe("CLOSED");
    const second = await createPayment(t.db, userId, { orderId: order.orderId }, app.payments);
    expect(second.outTradeNo).not.toBe(payment.outTradeNo);
    expect(second.replayed).toBe(false);
    // A success for the closed payment arriving late is acknowledged (money was taken) and flagged.
    const late = await deliver(successBody(payment.outTradeNo, payment.amountCents));
    expect(late.httpStatus).toBe(200);
    const [flag] = await t.sql`
      SELECT alert FROM payment_notification WHERE out_trade_no = ${payment.outTradeNo} ORDER BY id DESC LIMIT 1`;
    expect(flag?.alert).toBe(true);
    expect(await state(order.orderId)).toMatchObject({ order_status: "PENDING_PAYMENT", successes: 0 });
  });
});

describe("payments.create", () => {
  it("returns one payment for 20 concurrent calls", async () => {
    const userId = randomUUID();
    const caller = createCaller({ app, userId, requestId: randomUUID() });
    const order = await caller.orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-KETTLE", quantity: 1 }],
    });
    const payments = await Promise.all(
      Array.from({ length: 20 }, () => caller.payments.create({ orderId: order.orderId })),
    );
    expect(new Set(payments.map((p) => p.outTradeNo)).size).toBe(1);
    expect(payments.filter((p) => !p.replayed)).toHaveLength(1);
    expect(payments[0]).toMatchObject({ amountCents: 5400, currency: "USD" });
    expect((await state(order.orderId))?.payments).toBe(1);
  });

  it("answers the same pay link every time, also a second later (CI once saw two links for one payment)", async () => {
    const { userId, order, payment } = await pendingPayment();
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const again = await createCaller({ app, userId, requestId: randomUUID() }).payments.create({
      orderId: order.orderId,
    });
    expect(again).toMatchObject({ outTradeNo: payment.outTradeNo, payUrl: payment.payUrl, replayed: true });
  });

  it("refuses an order that is paid, or another shopper's order", async () => {
    const { userId, order, payment } = await pendingPayment();
    await deliver(successBody(payment.outTradeNo, payment.amountCents));
    const caller = createCaller({ app, userId, requestId: randomUUID() });
    await expect(caller.payments.create({ orderId: order.orderId })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
    });
    const stranger = createCaller({ app, userId: randomUUID(), requestId: randomUUID() });
    await expect(stranger.payments.create({ orderId: order.orderId })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    await expect(stranger.payments.create({ orderId: "not-a-uuid" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
    expect((await state(order.orderId))?.payments).toBe(1);
  });
});

describe("the mock provider's delivery", () => {
  let server: Server;
  let baseUrl: string;
  /** A provider whose answers are signed with another key: the merchant must not believe it. */
  let queryAnswerSecret = TEST_WEBHOOK_SECRET;
  /** Per out_trade_no: how many deliveries to fail first, and how (HTTP 500 or too slow). */
  const failFirst = new Map<string, { count: number; mode: "error" | "slow" }>();
  /** Status queries the provider was asked, per out_trade_no. */
  const statusQueries = new Map<string, number>();

  beforeAll(async () => {
    // The merchant endpoint as the provider sees it: the real handler, behind a flaky network.
    server = createServer((req, res) => {
      if (req.method === "GET") {
        // The provider's status query, as its route serves it.
        const url = new URL(req.url ?? "/", "http://x");
        const outTradeNo = decodeURIComponent(url.pathname.split("/").pop() ?? "");
        statusQueries.set(outTradeNo, (statusQueries.get(outTradeNo) ?? 0) + 1);
        void answerStatusQuery(
          mockPay.db,
          {
            appId: url.searchParams.get("app_id") ?? "",
            outTradeNo,
            signature: String(req.headers["provider-signature"] ?? ""),
          },
          queryAnswerSecret,
        ).then((answer) => {
          res.writeHead(answer.status, answer.signature ? { "provider-signature": answer.signature } : {});
          res.end(answer.body);
        });
        return;
      }
      let raw = "";
      req.on("data", (chunk) => (raw += chunk));
      req.on("end", async () => {
        const outTradeNo = (JSON.parse(raw) as { out_trade_no: string }).out_trade_no;
        const plan = failFirst.get(outTradeNo);
        if (plan && plan.count > 0) {
          plan.count--;
          if (plan.mode === "slow") await new Promise((resolve) => setTimeout(resolve, 400));
          res.writeHead(500).end("{}");
          return;
        }
        const answer = await handlePaymentNotification(
          t.db,
          {
            body: raw,
            signature: String(req.headers["provider-signature"] ?? ""),
            deliveryId: String(req.headers["provider-delivery-id"] ?? ""),
          },
          app.payments,
        );
        res
          .writeHead(answer.httpStatus, { "content-type": "application/json" })
          .end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** An order with a payment whose trade is open at the provider, notifying our stub merchant. */
  async function openTradeAtProvider() {
    const { userId, order } = await pendingPayment(1);
    const payment = await createPayment(
      t.db,
      userId,
      { orderId: order.orderId },
      { ...app.payments, baseUrl },
    );
    await openFromPayUrl(payment.payUrl);
    return { userId, order, payment };
  }

  async function paidTrade(failures?: { count: number; mode: "error" | "slow" }) {
    const { userId, order, payment } = await openTradeAtProvider();
    if (failures) failFirst.set(payment.outTradeNo, failures);
    const confirmations = await Promise.all([
      confirmTrade(mockPay.db, TEST_APP_ID, payment.outTradeNo),
      confirmTrade(mockPay.db, TEST_APP_ID, payment.outTradeNo),
    ]);
    expect(new Set(confirmations.map((c) => c.transactionId)).size).toBe(1);
    return { userId, order, payment, trade: confirmations[0] };
  }

  async function deliverUntilSettled(outTradeNo: string, deps = mockPay.delivery) {
    for (let round = 0; round < 50; round++) {
      await deliverDueNotifications(mockPay.db, deps);
      const [row] = await t.sql`
        SELECT n.status FROM provider_notification n JOIN provider_trade tr ON tr.id = n.trade_id
         WHERE tr.out_trade_no = ${outTradeNo}`;
      if (row?.status !== "PENDING") return row?.status;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return "PENDING";
  }

  it("delivers with duplicates: two at once, one more after success; still one payment", async () => {
    const { order, payment } = await paidTrade();
    expect(await deliverUntilSettled(payment.outTradeNo)).toBe("DELIVERED");
    const attempts = await t.sql`
      SELECT a.kind, a.ok, a.id FROM provider_delivery_attempt a
        JOIN provider_notification n ON n.id = a.notification_id
        JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${payment.outTradeNo} ORDER BY a.kind`;
    expect(attempts.map((a) => a.kind)).toEqual(["DUPLICATE", "DUPLICATE_AFTER_SUCCESS", "SCHEDULED"]);
    expect(new Set(attempts.map((a) => a.id)).size).toBe(3);
    expect(await state(order.orderId)).toMatchObject({
      order_status: "PAID",
      successes: 1,
      events: 1,
      processed: 1,
    });
    const [ids] = await t.sql`
      SELECT count(DISTINCT notification_id)::int AS notifications, count(DISTINCT delivery_id)::int AS deliveries
        FROM payment_notification WHERE out_trade_no = ${payment.outTradeNo}`;
    expect(ids).toEqual({ notifications: 1, deliveries: 3 });
  });

  it("retries a merchant that answers with errors until it acknowledges", async () => {
    const { order, payment } = await paidTrade({ count: 3, mode: "error" });
    expect(await deliverUntilSettled(payment.outTradeNo)).toBe("DELIVERED");
    const [n] = await t.sql`
      SELECT n.attempts FROM provider_notification n JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${payment.outTradeNo}`;
    expect(n?.attempts).toBeGreaterThanOrEqual(3);
    expect(await state(order.orderId)).toMatchObject({ order_status: "PAID", successes: 1, events: 1 });
  });

  it("counts a merchant slower than the timeout as failed and tries again", async () => {
    const { order, payment } = await paidTrade({ count: 2, mode: "slow" });
    const impatient = { ...mockPay.delivery, timeoutMs: 150 };
    expect(await deliverUntilSettled(payment.outTradeNo, impatient)).toBe("DELIVERED");
    const timeouts = await t.sql`
      SELECT a.error FROM provider_delivery_attempt a
        JOIN provider_notification n ON n.id = a.notification_id
        JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${payment.outTradeNo} AND a.error IS NOT NULL`;
    expect(timeouts.map((r) => r.error)).toContain("merchant timed out");
    expect(await state(order.orderId)).toMatchObject({ order_status: "PAID", successes: 1, events: 1 });
  });

  it("gives up after the schedule runs out", async () => {
    const { order, payment } = await paidTrade({ count: 100, mode: "error" });
    const short = { ...mockPay.delivery, sendDuplicates: false, schedule: [1, 1] };
    expect(await deliverUntilSettled(payment.outTradeNo, short)).toBe("GAVE_UP");
    expect((await state(order.orderId))?.order_status).toBe("PENDING_PAYMENT");
  });

  it("sends one payment.closed when the shopper cancels, however often", async () => {
    const { payment } = await openTradeAtProvider();
    await Promise.all([
      cancelTrade(mockPay.db, TEST_APP_ID, payment.outTradeNo),
      cancelTrade(mockPay.db, TEST_APP_ID, payment.outTradeNo),
    ]);
    // Paying a cancelled trade does nothing.
    expect((await confirmTrade(mockPay.db, TEST_APP_ID, payment.outTradeNo)).status).toBe("CLOSED");
    expect(await deliverUntilSettled(payment.outTradeNo)).toBe("DELIVERED");
    const [row] = await t.sql`SELECT status FROM payment_order WHERE out_trade_no = ${payment.outTradeNo}`;
    expect(row?.status).toBe("CLOSED");
  });

  const queryDeps = () => ({ ...app.payments, providerBaseUrl: baseUrl });

  it("finds a payment whose notifications were all dropped, once, through the status query", async () => {
    const { order, payment } = await paidTrade();
    await t.sql`UPDATE provider_trade SET drop_notifications = true WHERE out_trade_no = ${payment.outTradeNo}`;
    await deliverDueNotifications(mockPay.db, mockPay.delivery);
    expect((await state(order.orderId))?.order_status).toBe("PENDING_PAYMENT");

    const results = await Promise.all([
      syncStalePayments(t.db, queryDeps(), { olderThanS: 0 }),
      syncStalePayments(t.db, queryDeps(), { olderThanS: 0 }),
    ]);
    const mine = results.flat().filter((r) => r.outTradeNo === payment.outTradeNo);
    expect(mine.filter((r) => r.outcome === "PROCESSED")).toHaveLength(1);
    expect(await state(order.orderId)).toMatchObject({
      order_status: "PAID",
      successes: 1,
      events: 1,
      processed: 1,
    });
    const [dropped] = await t.sql`
      SELECT count(*)::int AS n FROM provider_delivery_attempt a
        JOIN provider_notification n ON n.id = a.notification_id
        JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${payment.outTradeNo} AND a.http_status IS NULL AND a.error LIKE 'dropped%'`;
    expect(dropped?.n).toBeGreaterThanOrEqual(1);
  });

  it("pays once when status queries race a late notification", async () => {
    const { order, payment } = await paidTrade();
    await Promise.all([
      ...Array.from({ length: 5 }, () => syncPaymentStatus(t.db, payment.outTradeNo, queryDeps())),
      ...Array.from({ length: 5 }, () => deliverDueNotifications(mockPay.db, mockPay.delivery)),
    ]);
    await deliverUntilSettled(payment.outTradeNo);
    expect(await state(order.orderId)).toMatchObject({
      order_status: "PAID",
      successes: 1,
      events: 1,
      processed: 1,
    });
  });

  it("refuses to believe an answer that is not signed by the provider", async () => {
    const { order, payment } = await paidTrade();
    await t.sql`UPDATE provider_trade SET drop_notifications = true WHERE out_trade_no = ${payment.outTradeNo}`;
    queryAnswerSecret = "whsec_an_impostor_0123456789";
    try {
      await expect(syncPaymentStatus(t.db, payment.outTradeNo, queryDeps())).rejects.toMatchObject({
        code: "SERVICE_UNAVAILABLE",
      });
    } finally {
      queryAnswerSecret = TEST_WEBHOOK_SECRET;
    }
    expect((await state(order.orderId))?.order_status).toBe("PENDING_PAYMENT");
  });

  it("answers the order page's check for the shopper only", async () => {
    const { userId, order, payment } = await paidTrade();
    await t.sql`UPDATE provider_trade SET drop_notifications = true WHERE out_trade_no = ${payment.outTradeNo}`;
    const stranger = createCaller({
      app: { ...app, payments: queryDeps() },
      userId: randomUUID(),
      requestId: "r",
    });
    await expect(stranger.payments.checkStatus({ orderId: order.orderId })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    const owner = createCaller({ app: { ...app, payments: queryDeps() }, userId, requestId: "r" });
    const checked = await owner.payments.checkStatus({ orderId: order.orderId });
    expect(checked).toMatchObject({
      orderStatus: "PAID",
      checked: [{ providerStatus: "PAID", outcome: "PROCESSED" }],
    });
    expect(await state(order.orderId)).toMatchObject({ successes: 1, events: 1 });
  });

  it("coalesces 50 concurrent checks of one order into one signed question to the provider", async () => {
    const { userId, order, payment } = await paidTrade();
    await t.sql`UPDATE provider_trade SET drop_notifications = true WHERE out_trade_no = ${payment.outTradeNo}`;
    const owner = createCaller({ app: { ...app, payments: queryDeps() }, userId, requestId: "r" });
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => owner.payments.checkStatus({ orderId: order.orderId })),
    );
    expect(statusQueries.get(payment.outTradeNo)).toBe(1);
    // Every caller waited for the one question and saw its answer.
    expect(new Set(answers.map((a) => a.orderStatus))).toEqual(new Set(["PAID"]));
    expect(await state(order.orderId)).toMatchObject({ successes: 1, events: 1 });

    // A payment still open at the provider: asked again within the second (a click on another instance,
    // say), it is not asked again; a second later it is.
    const open = await openTradeAtProvider();
    const shopper = createCaller({
      app: { ...app, payments: queryDeps() },
      userId: open.userId,
      requestId: "r",
    });
    await Promise.all(
      Array.from({ length: 10 }, () => shopper.payments.checkStatus({ orderId: open.order.orderId })),
    );
    expect(statusQueries.get(open.payment.outTradeNo)).toBe(1);
    // Another instance asked a moment ago (set a little ahead, so a slow machine cannot outlast the second).
    await t.sql`UPDATE payment_order SET last_queried_at = now() + interval '5 seconds'
                 WHERE out_trade_no = ${open.payment.outTradeNo}`;
    await shopper.payments.checkStatus({ orderId: open.order.orderId });
    expect(statusQueries.get(open.payment.outTradeNo)).toBe(1);
    await t.sql`UPDATE payment_order SET last_queried_at = now() - interval '2 seconds'
                 WHERE out_trade_no = ${open.payment.outTradeNo}`;
    expect(await shopper.payments.checkStatus({ orderId: open.order.orderId })).toMatchObject({
      orderStatus: "PENDING_PAYMENT",
      checked: [{ providerStatus: "WAITING" }],
    });
    expect(statusQueries.get(open.payment.outTradeNo)).toBe(2);
  });

  it("lets the admin page fire concurrent duplicates and faults at a paid trade without a second effect", async () => {
    const { order, payment } = await paidTrade();
    expect(await deliverUntilSettled(payment.outTradeNo)).toBe("DELIVERED");
    const run = (action: AdminActionInput["action"], count = 10) =>
      runAdminAction(
        mockPay.db,
        TEST_APP_ID,
        payment.outTradeNo,
        { action, count, delayS: 30 },
        mockPay.delivery,
      );

    const fired = await run("FIRE_CONCURRENT", 10);
    expect(fired.filter((r) => r.ok)).toHaveLength(10);
    const [tampered] = await run("TAMPERED_SIGNATURE");
    const [wrongAmount] = await run("WRONG_AMOUNT");
    const [stale] = await run("STALE_TIMESTAMP");
    expect([tampered?.httpStatus, wrongAmount?.httpStatus, stale?.httpStatus]).toEqual([401, 400, 401]);
    await run("CLOSED_AFTER_SUCCESS");
    expect(await deliverUntilSettled(payment.outTradeNo)).toBe("DELIVERED");
    await run("REORDER");

    expect(await state(order.orderId)).toMatchObject({
      order_status: "PAID",
      successes: 1,
      events: 1,
      processed: 1,
    });
    const outcomes = await t.sql`
      SELECT DISTINCT outcome FROM payment_notification WHERE out_trade_no = ${payment.outTradeNo} ORDER BY outcome`;
    // The tampered and the stale one failed verification: counted, not on the payment's record.
    expect(outcomes.map((r) => r.outcome)).toEqual(["AMOUNT_MISMATCH", "DUPLICATE", "IGNORED", "PROCESSED"]);
    expect(await app.payments.refusals.flush(t.db)).toEqual({ BAD_SIGNATURE: 1, STALE_TIMESTAMP: 1 });
  });

  it("lets the admin page delay and drop deliveries", async () => {
    const { order, payment } = await paidTrade();
    await runAdminAction(
      mockPay.db,
      TEST_APP_ID,
      payment.outTradeNo,
      { action: "DELAY", count: 1, delayS: 600 },
      mockPay.delivery,
    );
    await deliverDueNotifications(mockPay.db, mockPay.delivery);
    const [delayed] = await t.sql`
      SELECT count(*)::int AS n FROM provider_delivery_attempt a
        JOIN provider_notification n ON n.id = a.notification_id
        JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${payment.outTradeNo}`;
    expect(delayed?.n).toBe(0);
    await runAdminAction(
      mockPay.db,
      TEST_APP_ID,
      payment.outTradeNo,
      { action: "DROP_ON", count: 1, delayS: 1 },
      mockPay.delivery,
    );
    const [sent] = await runAdminAction(
      mockPay.db,
      TEST_APP_ID,
      payment.outTradeNo,
      { action: "RESEND", count: 1, delayS: 1 },
      mockPay.delivery,
    );
    expect(sent).toMatchObject({ ok: false, httpStatus: null });
    expect((await state(order.orderId))?.order_status).toBe("PENDING_PAYMENT");
  });
});

describe("afterwards", () => {
  it("leaves the database reconciled", async () => {
    const report = await reconcile(t.db);
    expect(report.invariants.flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`))).toEqual([]);
  });
});
