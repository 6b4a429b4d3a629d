import { randomUUID } from "node:crypto";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import { createOrder } from "~/server/orders/create-order";
import { reconcile } from "~/server/reconciliation/reconcile";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { payRequestSchema } from "~/shared/provider-contract";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import {
  consumeOrderEvents,
  deliverAll,
  factAbout,
  mockPayFault,
  notifyAsProvider,
  orderAwaitingPayment,
  payThroughProvider,
  scarceSku,
} from "./support/scenarios";

/**
 * Money at the intersections of correct-looking steps (issue 24's four defects, found from outside). Each
 * story ends with reconciliation, conservation included, finding nothing.
 */

const violations = async (db: Parameters<typeof reconcile>[0]) =>
  (await reconcile(db, { lagSeconds: 0 })).invariants
    .filter((i) => i.name !== "events-delivered")
    .flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`));

async function refundsOf(database: TestDatabase, orderId: string) {
  return database.sql<{ refund_no: string; amount: number; status: string; payment: string }[]>`
    SELECT r.refund_no, r.amount_cents::int AS amount, r.status, p.status AS payment
      FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
     WHERE r.order_id = ${orderId} ORDER BY r.created_at`;
}

describe("a late payment, then the order runs short of stock", () => {
  test("the automatic refund returns the paying payment in full, beside the late one's refund", async ({
    app,
    mockPay,
    database,
  }) => {
    const skuId = await scarceSku(app.db, 1);
    const shopper = await orderAwaitingPayment(app, mockPay, { items: [{ skuId, quantity: 1 }] });
    // Payment A is paid at MockPay while its notifications are dropped; a late close reaches the merchant first.
    await mockPayFault(mockPay, shopper.outTradeNo, "DROP_ON");
    const paidA = await shopper.confirm();
    const a = { ...shopper.payment, currency: "USD" };
    await notifyAsProvider(app, { ...factAbout(app, a), type: "payment.closed", transaction_id: null });
    // The shopper pays again (payment B), and meanwhile another shopper takes the last unit.
    const b = await shopper.caller.payments.create({ orderId: shopper.orderId });
    const rival = await payThroughProvider(app, mockPay, [{ skuId, quantity: 1 }]);
    await consumeOrderEvents(app.db, rival.orderId);
    // A's success is delivered: A is PAID_LATE and refunded in full (MockPay delivers again by then).
    await mockPayFault(mockPay, shopper.outTradeNo, "DROP_OFF");
    await notifyAsProvider(app, {
      ...factAbout(app, a),
      type: "payment.succeeded",
      transaction_id: paidA.transactionId,
    });
    await submitPendingRefunds(app.db, app.payments);
    await deliverAll(mockPay);
    // Then B is confirmed: the order is paid by B, and its stock runs short.
    const { sig, ...request } = payRequestSchema.parse(
      Object.fromEntries(new URL(b.payUrl, "http://x").searchParams),
    );
    await openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
    await confirmTrade(mockPay.db, mockPay.appId, b.outTradeNo);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, shopper.orderId);
    await submitPendingRefunds(app.db, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, shopper.orderId);

    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${shopper.orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(await refundsOf(database, shopper.orderId)).toEqual([
      {
        refund_no: `sys/late/${paidA.transactionId}`,
        amount: 1870,
        status: "REFUND_SUCCESS",
        payment: "PAID_LATE",
      },
      {
        refund_no: `sys/auto/${shopper.orderId}`,
        amount: 1870,
        status: "REFUND_SUCCESS",
        payment: "SUCCESS",
      },
    ]);
    expect(await violations(app.db)).toEqual([]);
  });
});

describe("a refund superseded by one that then fails", () => {
  test("is failed again (awaiting a person, alerting), and a Retry of it goes through", async ({
    app,
    mockPay,
    database,
  }) => {
    const skuId = await scarceSku(app.db, 10);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    expect(paid.amountCents).toBe(3740);
    await mockPayFault(mockPay, paid.outTradeNo, "REJECT_REFUNDS", 2);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const half = `R-${randomUUID()}`;
    const full = `R-${randomUUID()}`;
    await caller.refunds.create({ orderId: paid.orderId, refundNo: half, amountCents: 1870 });
    await caller.refunds.create({ orderId: paid.orderId, refundNo: full, amountCents: 3740 });
    // The full refund superseded the half one when it was recorded, and was then rejected itself.
    expect(await refundsOf(database, paid.orderId)).toEqual([
      { refund_no: half, amount: 1870, status: "REFUND_FAILED", payment: "SUCCESS" },
      { refund_no: full, amount: 3740, status: "REFUND_FAILED", payment: "SUCCESS" },
    ]);
    const alerts = alertsFrom(await opsFigures(app.db));
    expect(alerts.find((alert) => alert.name === "refund_failed")?.detail).toMatch(/^2 refund/);
    const found = await violations(app.db);
    expect(found.filter((v) => v.includes("superseded"))).toEqual([]);
    expect(found.filter((v) => v.includes("not retried"))).toHaveLength(1);

    // The operator retries the half one: it goes through, and the full one no longer fits.
    const [row] = await database.sql<{ provider_refund_no: string }[]>`
      SELECT provider_refund_no FROM refund_order WHERE refund_no = ${half}`;
    expect(await retryFailedRefund(app.db, row?.provider_refund_no ?? "", app.payments)).toBe(
      "REFUND_PROCESSING",
    );
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    expect((await refundsOf(database, paid.orderId)).map((r) => r.status)).toEqual([
      "REFUND_SUCCESS",
      "REFUND_SUPERSEDED",
    ]);
    expect(await violations(app.db)).toEqual([]);
  });
});

describe("an order short of stock whose automatic refund is superseded by the shopper's (found by the model checker)", () => {
  test("what the order still keeps is refunded anew: it ends refunded in full", async ({
    app,
    mockPay,
    database,
  }) => {
    const skuId = await scarceSku(app.db, 1);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 1 }]);
    // The last unit went elsewhere before the order was filled (written off, as stock counts do).
    await database.sql`UPDATE sku SET stock = 0, initial_stock = initial_stock - 1 WHERE id = ${skuId}`;
    await mockPayFault(mockPay, paid.outTradeNo, "REJECT_REFUNDS", 2);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const half = randomUUID();
    // The shopper's refund of half is rejected; the order runs short; its automatic refund of everything
    // supersedes it, and is rejected too: the half fits again, both await the operator.
    await caller.refunds.create({ orderId: paid.orderId, refundNo: half, amountCents: 935 });
    await consumeOrderEvents(app.db, paid.orderId);
    await submitPendingRefunds(app.db, app.payments);
    expect((await refundsOf(database, paid.orderId)).map((r) => r.status)).toEqual([
      "REFUND_FAILED",
      "REFUND_FAILED",
    ]);
    // The operator retries the shopper's first: it is paid, and the automatic one no longer fits.
    const [row] = await database.sql<{ provider_refund_no: string }[]>`
      SELECT provider_refund_no FROM refund_order WHERE refund_no = ${half}`;
    await retryFailedRefund(app.db, row?.provider_refund_no ?? "", app.payments);
    await deliverAll(mockPay);
    await submitPendingRefunds(app.db, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    expect(await refundsOf(database, paid.orderId)).toEqual([
      { refund_no: half, amount: 935, status: "REFUND_SUCCESS", payment: "SUCCESS" },
      {
        refund_no: `sys/auto/${paid.orderId}`,
        amount: 1870,
        status: "REFUND_SUPERSEDED",
        payment: "SUCCESS",
      },
      { refund_no: `sys/auto/${paid.orderId}/2`, amount: 935, status: "REFUND_SUCCESS", payment: "SUCCESS" },
    ]);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(await violations(app.db)).toEqual([]);
  });
});

describe("a request id reused after its idempotency record expired", () => {
  test("another cart with the same total is refused (422), not answered with the old order", async ({
    app,
    database,
  }) => {
    const twin = await scarceSku(app.db, 100, 1250);
    const userId = randomUUID();
    const requestId = randomUUID();
    const first = await createOrder(app.db, userId, {
      requestId,
      items: [{ skuId: "SKU-MUG", quantity: 2 }],
    });
    await database.sql`DELETE FROM idempotency_record WHERE user_id = ${userId} AND idempotency_key = ${requestId}`;
    // The same request after expiry still finds its order.
    const again = await createOrder(app.db, userId, {
      requestId,
      items: [{ skuId: "SKU-MUG", quantity: 2 }],
    });
    expect(again).toMatchObject({ orderId: first.orderId, replayed: true });
    await database.sql`DELETE FROM idempotency_record WHERE user_id = ${userId} AND idempotency_key = ${requestId}`;
    const other = createOrder(app.db, userId, {
      requestId,
      items: [
        { skuId: "SKU-MUG", quantity: 1 },
        { skuId: twin, quantity: 1 },
      ],
    });
    await expect(other).rejects.toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    const [orders] = await database.sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`;
    expect(orders?.n).toBe(1);
  });
});
