import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { runAdminAction } from "~/mockpay/server/admin";
import type { MockPayContext } from "~/mockpay/server/context";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import type { AppContext } from "~/server/app-context";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { createOrder } from "~/server/orders/create-order";
import { createPayment } from "~/server/payments/create-payment";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { syncStalePayments } from "~/server/payments/status-query";
import { reconcile } from "~/server/reconciliation/reconcile";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { payRequestSchema, signBody } from "~/shared/provider-contract";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";
import type { LoopbackApp } from "./support/loopback-app";
import { deliverAll, payThroughProvider } from "./support/scenarios";

let t: TestDatabase;
let loop: LoopbackApp;
let app: AppContext;
let mockPay: MockPayContext;

// The database, and merchant and MockPay talking over loopback HTTP, come from the file's fixtures.
test.beforeAll(({ database, loopback }) => {
  t = database;
  loop = loopback;
  app = loop.app;
  mockPay = loop.mockPay;
});

const callerFor = (userId: string) => createCaller({ app, userId, requestId: randomUUID() });

async function eventId(orderId: string, type: string, refundNo?: string) {
  const [row] = await t.sql<{ id: string }[]>`
    SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = ${type}
       AND (${refundNo ?? null}::text IS NULL OR payload->>'refundNo' = ${refundNo ?? null})`;
  if (!row) throw new Error(`no ${type} event for ${orderId}`);
  return row.id;
}

async function refundsOf(orderId: string) {
  return t.sql<{ refund_no: string; amount_cents: string; status: string }[]>`
    SELECT refund_no, amount_cents, status FROM refund_order WHERE order_id = ${orderId} ORDER BY created_at`;
}

async function stockOf(skuId: string) {
  const [row] = await t.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`;
  return row?.stock ?? -1;
}

describe("a late close that overtook the success", () => {
  it("is confirmed with MockPay once; its success wins and pays the order once", async () => {
    const userId = randomUUID();
    const order = await createOrder(t.db, userId, {
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const payment = await createPayment(t.db, userId, { orderId: order.orderId }, app.payments);
    const { sig, ...request } = payRequestSchema.parse(
      Object.fromEntries(new URL(payment.payUrl, "http://x").searchParams),
    );
    await openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
    await confirmTrade(mockPay.db, mockPay.appId, payment.outTradeNo); // MockPay has the money…
    const close = JSON.stringify({
      id: `evt_${randomUUID()}`,
      type: "payment.closed",
      app_id: app.payments.appId,
      out_trade_no: payment.outTradeNo,
      transaction_id: null,
      amount_cents: payment.amountCents,
      currency: payment.currency,
      created_at: new Date().toISOString(),
    });
    // …but the merchant hears a close first, and the success never (all its deliveries lost).
    await handlePaymentNotification(
      t.db,
      {
        body: close,
        signature: signBody("notification", app.payments.webhookSecret, close, Math.floor(Date.now() / 1000)),
        deliveryId: null,
      },
      app.payments,
    );
    const [closed] = await t.sql`SELECT status FROM payment_order WHERE out_trade_no = ${payment.outTradeNo}`;
    expect(closed?.status).toBe("CLOSED");
    await new Promise((resolve) => setTimeout(resolve, 20));
    await Promise.all(
      Array.from({ length: 3 }, () => syncStalePayments(t.db, app.payments, { olderThanS: 0 })),
    );
    const again = await syncStalePayments(t.db, app.payments, { olderThanS: 0 });
    expect(again).toEqual([]); // asked once after closing, not forever
    const [facts] = await t.sql`
      SELECT (SELECT status FROM payment_order WHERE out_trade_no = ${payment.outTradeNo}) AS payment,
             (SELECT status FROM orders WHERE id = ${order.orderId}) AS order_status,
             (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${order.orderId}::text
               AND event_type = 'OrderPaid') AS events`;
    expect(facts).toEqual({ payment: "SUCCESS", order_status: "PAID", events: 1 });
  });
});

describe("refunds", () => {
  it("applies a refund whose notifications were all lost, once, when the status query finds it at MockPay", async () => {
    const { userId, orderId, amountCents, outTradeNo } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-MUG", quantity: 1 },
    ]);
    await runAdminAction(
      mockPay.db,
      mockPay.appId,
      outTradeNo,
      { action: "DROP_ON", count: 1, delayS: 1 },
      mockPay.delivery,
    );
    const refundNo = `R-${randomUUID()}`;
    await callerFor(userId).refunds.create({ orderId, refundNo, amountCents });
    await deliverAll(mockPay);
    expect((await refundsOf(orderId))[0]?.status).toBe("REFUND_PROCESSING");

    const runs = await Promise.all(
      Array.from({ length: 5 }, () => syncStalePayments(t.db, app.payments, { olderThanS: 0 })),
    );
    expect(runs.flat().filter((r) => r.outcome.includes("PROCESSED"))).toHaveLength(1);
    await syncStalePayments(t.db, app.payments, { olderThanS: 0 });
    expect((await refundsOf(orderId))[0]?.status).toBe("REFUND_SUCCESS");
    const [facts] = await t.sql`
      SELECT (SELECT status FROM orders WHERE id = ${orderId}) AS order_status,
             (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${orderId}::text
               AND event_type = 'RefundSucceeded') AS events`;
    expect(facts).toEqual({ order_status: "REFUNDED", events: 1 });
  });

  it("makes one refund from 20 concurrent requests with the same refund_no, and refunds it once", async () => {
    const { userId, orderId, amountCents } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-MUG", quantity: 2 },
    ]);
    const refundNo = `R-${randomUUID()}`;
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => callerFor(userId).refunds.create({ orderId, refundNo, amountCents })),
    );
    expect(new Set(answers.map((a) => a.refundNo))).toEqual(new Set([refundNo]));
    expect(answers.filter((a) => !a.replayed)).toHaveLength(1);
    await deliverAll(mockPay);
    expect(await refundsOf(orderId)).toEqual([
      { refund_no: refundNo, amount_cents: "2500", status: "REFUND_SUCCESS" },
    ]);
    const [order] = await t.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("REFUNDED");
    const [facts] = await t.sql`
      SELECT (SELECT count(*)::int FROM provider_refund r JOIN provider_trade tr ON tr.id = r.trade_id
               JOIN payment_order p ON p.out_trade_no = tr.out_trade_no WHERE p.order_id = ${orderId}) AS at_provider,
             (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${orderId}::text
               AND event_type = 'RefundSucceeded') AS events`;
    expect(facts).toEqual({ at_provider: 1, events: 1 });
  });

  it("never refunds more than was paid when different refund_no values race", async () => {
    const { userId, orderId, amountCents } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-ESPRESSO", quantity: 2 },
    ]);
    const share = Math.ceil(amountCents * 0.6);
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        callerFor(userId).refunds.create({
          orderId,
          refundNo: `RACE-${orderId}-${i % 2}`,
          amountCents: share,
        }),
      ),
    );
    const accepted = new Set(results.flatMap((r) => (r.status === "fulfilled" ? [r.value.refundNo] : [])));
    expect(accepted.size).toBe(1);
    for (const r of results) {
      if (r.status === "rejected") expect(r.reason).toMatchObject({ code: "PRECONDITION_FAILED" });
    }
    await deliverAll(mockPay);
    const refunds = await refundsOf(orderId);
    expect(refunds).toHaveLength(1);
    expect(refunds.reduce((sum, r) => sum + Number(r.amount_cents), 0)).toBeLessThanOrEqual(amountCents);
  });

  it("keeps refund numbers per shopper: ten shoppers using one number at once each get their own refund", async () => {
    const shoppers = await Promise.all(
      Array.from({ length: 10 }, () => payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }])),
    );
    const refundNo = `SHARED-${randomUUID()}`;
    // Each shopper sends theirs three times at once; nobody learns the number is anybody else's.
    const answers = await Promise.all(
      shoppers.flatMap(({ userId, orderId }) =>
        Array.from({ length: 3 }, () =>
          callerFor(userId).refunds.create({ orderId, refundNo, amountCents: 100 }),
        ),
      ),
    );
    expect(answers.every((answer) => answer.refundNo === refundNo && answer.amountCents === 100)).toBe(true);
    await deliverAll(mockPay);
    const rows = await t.sql<{ n: number; providers: number; done: number; at_provider: number }[]>`
      SELECT count(*)::int AS n, count(DISTINCT provider_refund_no)::int AS providers,
             count(*) FILTER (WHERE status = 'REFUND_SUCCESS')::int AS done,
             (SELECT count(*)::int FROM provider_refund pr
               WHERE pr.refund_no IN (SELECT provider_refund_no FROM refund_order WHERE refund_no = ${refundNo})) AS at_provider
        FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(rows[0]).toEqual({ n: 10, providers: 10, done: 10, at_provider: 10 });
    // A system refund's number is out of every shopper's reach.
    await expect(
      callerFor(shoppers[0]?.userId ?? "").refunds.create({
        orderId: shoppers[0]?.orderId ?? "",
        refundNo: `sys/auto/${shoppers[0]?.orderId}`,
        amountCents: 1,
      }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
  });

  it("refuses bad refunds clearly and writes nothing", async () => {
    const { userId, orderId, amountCents } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-MUG", quantity: 1 },
    ]);
    const caller = callerFor(userId);
    const refundNo = `R-${randomUUID()}`;
    await caller.refunds.create({ orderId, refundNo, amountCents: 100 });
    await expect(caller.refunds.create({ orderId, refundNo, amountCents: 200 })).rejects.toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
    });
    await expect(
      caller.refunds.create({ orderId, refundNo: "R-zero-amount", amountCents: 0 }),
    ).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
    await expect(
      caller.refunds.create({ orderId, refundNo: `R-${randomUUID()}`, amountCents: amountCents }),
    ).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
    await expect(
      callerFor(randomUUID()).refunds.create({ orderId, refundNo: `R-${randomUUID()}`, amountCents: 1 }),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    const unpaid = await caller.orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    await expect(
      caller.refunds.create({ orderId: unpaid.orderId, refundNo: `R-${randomUUID()}`, amountCents: 1 }),
    ).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
    expect(await refundsOf(orderId)).toHaveLength(1);
    expect(await refundsOf(unpaid.orderId)).toHaveLength(0);
  });

  it("returns stock and reverses benefits once, however often refund.succeeded arrives", async () => {
    const before = await stockOf("SKU-GRINDER");
    const { userId, orderId, amountCents, outTradeNo } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-GRINDER", quantity: 2 },
    ]);
    const paid = await eventId(orderId, "OrderPaid");
    await handleConsumeJob(t.db, { eventId: paid, consumer: "stock" });
    await handleConsumeJob(t.db, { eventId: paid, consumer: "benefits" });
    expect(await stockOf("SKU-GRINDER")).toBe(before - 2);

    const refundNo = `R-${randomUUID()}`;
    await callerFor(userId).refunds.create({ orderId, refundNo, amountCents });
    await deliverAll(mockPay);
    // The provider's admin fires the refund notification ten more times at once.
    const [refundNotification] = await t.sql`
      SELECT n.id FROM provider_notification n JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${outTradeNo} AND n.type = 'refund.succeeded'`;
    expect(refundNotification).toBeDefined();
    const fired = await runAdminAction(
      mockPay.db,
      mockPay.appId,
      outTradeNo,
      { action: "FIRE_CONCURRENT", count: 10, delayS: 1 },
      mockPay.delivery,
    );
    expect(fired.every((r) => r.ok)).toBe(true);

    const refunded = await eventId(orderId, "RefundSucceeded", refundNo);
    const storm = (consumer: string) =>
      Promise.all(Array.from({ length: 10 }, () => handleConsumeJob(t.db, { eventId: refunded, consumer })));
    const [returns, reversals] = await Promise.all([storm("stock-return"), storm("benefit-reversal")]);
    expect(returns.filter((o) => o === "APPLIED")).toHaveLength(1);
    expect(reversals.filter((o) => o === "APPLIED")).toHaveLength(1);
    expect(await stockOf("SKU-GRINDER")).toBe(before);
    const [facts] = await t.sql`
      SELECT (SELECT count(*)::int FROM stock_return_record WHERE order_id = ${orderId}) AS returns,
             (SELECT count(*)::int FROM benefit_reversal WHERE order_id = ${orderId}) AS reversals,
             (SELECT count(*)::int FROM refund_order WHERE order_id = ${orderId} AND status = 'REFUND_SUCCESS') AS refunds`;
    expect(facts).toEqual({ returns: 1, reversals: 2, refunds: 1 });
  });

  it("takes 10 copies of refund.succeeded at once without a false alert (the losers re-read the refund)", async () => {
    const { userId, orderId, amountCents, outTradeNo } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-MUG", quantity: 1 },
    ]);
    const refundNo = `R-${randomUUID()}`;
    await callerFor(userId).refunds.create({ orderId, refundNo, amountCents });
    const [queued] = await t.sql<{ body: unknown }[]>`
      SELECT n.body FROM provider_notification n JOIN provider_trade tr ON tr.id = n.trade_id
       WHERE tr.out_trade_no = ${outTradeNo} AND n.type = 'refund.succeeded'`;
    const body = JSON.stringify(queued?.body);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        handlePaymentNotification(
          t.db,
          {
            body,
            signature: signBody(
              "notification",
              app.payments.webhookSecret,
              body,
              Math.floor(Date.now() / 1000),
            ),
            deliveryId: randomUUID(),
          },
          app.payments,
        ),
      ),
    );
    expect(answers.every((answer) => answer.httpStatus === 200)).toBe(true);
    const [alerts] = await t.sql`
      SELECT count(*)::int AS n FROM payment_notification WHERE out_trade_no = ${outTradeNo} AND alert`;
    expect(alerts?.n).toBe(0);
  });

  it("marks an order refunded when two refunds that add up to its amount succeed at the same moment", async () => {
    // Each refund.succeeded sums the order's successful refunds; two arriving together must not both
    // miss the other (the chaos run saw a shopper's refund and the automatic one leave an order unrefunded).
    const signed = (body: object) => {
      const text = JSON.stringify(body);
      return {
        body: text,
        signature: signBody("notification", app.payments.webhookSecret, text, Math.floor(Date.now() / 1000)),
        deliveryId: null,
      };
    };
    const orders = [];
    for (let n = 0; n < 8; n++) {
      const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
      const half = Math.floor(paid.amountCents / 2);
      const refunds = [half, paid.amountCents - half].map((amountCents) => ({
        refundNo: `R-${randomUUID()}`,
        amountCents,
      }));
      for (const refund of refunds) {
        await callerFor(paid.userId).refunds.create({ orderId: paid.orderId, ...refund });
      }
      const [payment] = await t.sql<{ transaction_id: string }[]>`
        SELECT transaction_id FROM payment_order WHERE out_trade_no = ${paid.outTradeNo}`;
      const providerNos = new Map(
        (
          await t.sql<{ refund_no: string; provider_refund_no: string }[]>`
            SELECT refund_no, provider_refund_no FROM refund_order WHERE order_id = ${paid.orderId}`
        ).map((row) => [row.refund_no, row.provider_refund_no]),
      );
      const notifications = refunds.map((refund) =>
        signed({
          id: `evt_${randomUUID()}`,
          type: "refund.succeeded",
          app_id: app.payments.appId,
          out_trade_no: paid.outTradeNo,
          transaction_id: payment?.transaction_id,
          refund_no: providerNos.get(refund.refundNo),
          amount_cents: refund.amountCents,
          currency: "USD",
          created_at: new Date().toISOString(),
        }),
      );
      orders.push({ ...paid, notifications });
    }
    // Both notifications of every order at once.
    const verdicts = await Promise.all(
      orders.flatMap((o) => o.notifications.map((n) => handlePaymentNotification(t.db, n, app.payments))),
    );
    expect(verdicts.map((v) => v.httpStatus)).toEqual(verdicts.map(() => 200));
    for (const o of orders) {
      const [facts] = await t.sql`
        SELECT (SELECT status FROM orders WHERE id = ${o.orderId}) AS order_status,
               (SELECT count(*)::int FROM refund_order WHERE order_id = ${o.orderId} AND status = 'REFUND_SUCCESS') AS refunds,
               (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${o.orderId}::text
                 AND event_type = 'RefundSucceeded' AND (payload->>'fullyRefunded')::boolean) AS full_events`;
      expect(facts).toEqual({ order_status: "REFUNDED", refunds: 2, full_events: 1 });
    }
  });

  it("refunds an order automatically, once, when its stock runs short", async () => {
    const { orderId, amountCents } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-KETTLE", quantity: 2 },
    ]);
    // Between payment and fulfilment the stock went elsewhere (written off, as stock counts do).
    await t.sql`UPDATE sku SET stock = 1, initial_stock = initial_stock - (stock - 1) WHERE id = 'SKU-KETTLE'`;
    const paid = await eventId(orderId, "OrderPaid");
    expect(await handleConsumeJob(t.db, { eventId: paid, consumer: "stock" })).toBe("SKIPPED");
    const short = await eventId(orderId, "StockShort");
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => handleConsumeJob(t.db, { eventId: short, consumer: "auto-refund" })),
    );
    expect(outcomes.filter((o) => o === "APPLIED")).toHaveLength(1);
    await Promise.all([submitPendingRefunds(t.db, app.payments), submitPendingRefunds(t.db, app.payments)]);
    await deliverAll(mockPay);
    expect(await refundsOf(orderId)).toEqual([
      { refund_no: `sys/auto/${orderId}`, amount_cents: String(amountCents), status: "REFUND_SUCCESS" },
    ]);
    const [order] = await t.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(await stockOf("SKU-KETTLE")).toBe(1);
  });
});

describe("the automatic refund", () => {
  it("refunds what is left when the shopper's own refund is being recorded at that moment", async () => {
    const { orderId, amountCents } = await payThroughProvider(app, mockPay, [
      { skuId: "SKU-KETTLE", quantity: 1 },
    ]);
    // Between payment and fulfilment the last kettles went elsewhere (written off).
    await t.sql`UPDATE sku SET stock = 0, initial_stock = initial_stock - stock WHERE id = 'SKU-KETTLE'`;
    const paid = await eventId(orderId, "OrderPaid");
    expect(await handleConsumeJob(t.db, { eventId: paid, consumer: "stock" })).toBe("SKIPPED");
    const short = await eventId(orderId, "StockShort");
    // The shopper's refund is being recorded: its transaction holds the payment, as recordRefund does.
    const shopper = await t.db.$client.reserve();
    try {
      await shopper`BEGIN`;
      const [payment] = await shopper<{ id: string }[]>`
        SELECT id FROM payment_order WHERE order_id = ${orderId} AND status = 'SUCCESS' FOR UPDATE`;
      const automatic = handleConsumeJob(t.db, { eventId: short, consumer: "auto-refund" });
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Recorded as recordRefund records it: the refund, and its amount owed in the ledger.
      await shopper`
        WITH refund AS (
          INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, reason)
          SELECT user_id, ${`R-${randomUUID()}`}, ${randomUUID()}, id, ${payment?.id ?? ""}, 1000, 'USD', 'changed my mind'
            FROM orders WHERE id = ${orderId}
          RETURNING user_id, id, order_id, payment_id, provider_refund_no, amount_cents, currency)
        INSERT INTO ledger_transfer (user_id, order_id, payment_id, refund_id, fact_key, from_account, to_account, amount_cents, currency)
        SELECT user_id, order_id, payment_id, id, 'refund:' || provider_refund_no || ':1:owed', 'revenue', 'refunds_payable',
               amount_cents, currency FROM refund`;
      await shopper`COMMIT`;
      // Reading what was left before the lock, it asked for the whole amount and was refused (then retried).
      expect(await automatic).toBe("APPLIED");
    } finally {
      shopper.release();
    }
    const refunds = await refundsOf(orderId);
    expect(refunds.find((r) => r.refund_no === `sys/auto/${orderId}`)?.amount_cents).toBe(
      String(amountCents - 1000),
    );
    await submitPendingRefunds(t.db, app.payments);
    await deliverAll(mockPay);
    const [order] = await t.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("REFUNDED");
  });
});

describe("afterwards", () => {
  it("leaves the database reconciled", async () => {
    const report = await reconcile(t.db);
    expect(report.invariants.flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`))).toEqual([]);
  });
});
