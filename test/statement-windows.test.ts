import { randomUUID } from "node:crypto";
import type { IdempotencyEvent } from "@exactly-once/idempotency";
import type postgres from "postgres";
import type { MockPayContext } from "~/mockpay/server/context";
import type { AppContext } from "~/server/app-context";
import { revokeCoupon } from "~/server/coupons/coupons";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { createOrder } from "~/server/orders/create-order";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { receiveReturn } from "~/server/refunds/returns";
import { createCaller } from "~/server/trpc/root";
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
  unitLeftBehindForRejectedRefund,
  violationsOf,
} from "./support/scenarios";

/**
 * Windows between two statements of one transaction, where another actor commits: each test holds the other
 * actor's transaction open at the moment that matters, then lets it commit, and checks what stays. The
 * permutation harness (npm run interleavings) explores every such moment; these pin the ones that were wrong.
 */

/** A transaction on a connection of its own, held open until `commit()`. */
async function openTransaction(database: TestDatabase) {
  const conn = await database.sql.reserve();
  await conn`BEGIN`;
  return {
    sql: conn as postgres.Sql,
    async commit() {
      await conn`COMMIT`;
      conn.release();
    },
  };
}

/** Resolves once some statement of this database waits on a lock. */
async function someoneWaits(database: TestDatabase) {
  await expect
    .poll(
      async () => {
        const [row] = await database.sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`;
        return row?.n ?? 0;
      },
      { interval: 10, timeout: 10_000 },
    )
    .toBeGreaterThan(0);
}

describe("a cancel that holds the order while a success arrives for its crossed-closed payment", () => {
  test("the success waits for the order, then takes the money as late and owes it back", async ({
    app,
    mockPay,
    database,
  }) => {
    const { orderId, payment, confirm } = await orderAwaitingPayment(app, mockPay);
    const paid = await confirm();
    // A crossed close reached the merchant first: the payment is CLOSED here, the order still awaits payment.
    await notifyAsProvider(app, { ...factAbout(app, payment), type: "payment.closed", transaction_id: null });

    // The cancel's transaction: the order locked and closed, not yet committed.
    const cancel = await openTransaction(database);
    await cancel.sql`SELECT id FROM orders WHERE id = ${orderId} FOR UPDATE`;
    await cancel.sql`UPDATE orders SET status = 'CLOSED' WHERE id = ${orderId} AND status = 'PENDING_PAYMENT'`;
    const success = notifyAsProvider(app, {
      ...factAbout(app, payment),
      type: "payment.succeeded",
      transaction_id: paid.transactionId,
    });
    await someoneWaits(database);
    await cancel.commit();
    expect((await success).httpStatus).toBe(200);

    const [after] = await database.sql`
      SELECT o.status AS order, p.status AS payment, r.refund_no, r.status AS refund, r.amount_cents::int AS refunded
        FROM orders o JOIN payment_order p ON p.order_id = o.id
        LEFT JOIN refund_order r ON r.payment_id = p.id
       WHERE o.id = ${orderId}`;
    expect(after).toEqual({
      order: "CLOSED",
      payment: "PAID_LATE",
      refund_no: `sys/late/${paid.transactionId}`,
      refund: "REFUND_CREATED",
      refunded: payment.amountCents,
    });
  });
});

describe("a request sent again after its key expired, once what it was refused for has changed", () => {
  /** Forgets every idempotency record of the shopper, as the expiry sweep would a day later. */
  const expireKeys = (database: TestDatabase, userId: string) =>
    database.sql`DELETE FROM idempotency_record WHERE user_id = ${userId}`;
  const recordOf = async (database: TestDatabase, userId: string, requestId: string) => {
    const [row] = await database.sql<{ status: string; biz_id: string | null }[]>`
      SELECT status, biz_id FROM idempotency_record WHERE user_id = ${userId} AND idempotency_key = ${requestId}`;
    return row;
  };

  test("its last unit sold since: answered with its order, and its record is that success", async ({
    app,
    database,
  }) => {
    const skuId = await scarceSku(app.db, 1);
    const userId = randomUUID();
    const requestId = randomUUID();
    const first = await createOrder(app.db, userId, { requestId, items: [{ skuId, quantity: 1 }] });
    await database.sql`UPDATE sku SET stock = 0, initial_stock = 0 WHERE id = ${skuId}`;
    await expireKeys(database, userId);

    const events: IdempotencyEvent[] = [];
    const idempotency = { ...app.idempotency, observe: (event: IdempotencyEvent) => events.push(event) };
    const again = await createOrder(
      app.db,
      userId,
      { requestId, items: [{ skuId, quantity: 1 }] },
      { idempotency },
    );
    expect(again).toMatchObject({ orderId: first.orderId, replayed: true });
    expect(await recordOf(database, userId, requestId)).toEqual({ status: "SUCCESS", biz_id: first.orderId });
    // Told as what it was (a replay the order's unique index answered), not as a second execution.
    expect(events).toMatchObject([
      { outcome: "replayed", absorbedBy: expect.stringContaining("orders_user_id_request_id_uq") },
    ]);
  });

  test("its coupon revoked since (the order that earned it was refunded): answered with its order", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
    await consumeOrderEvents(app.db, paid.orderId);
    const [grant] = await database.sql<{ code: string }[]>`
      SELECT code FROM benefit_grant WHERE order_id = ${paid.orderId} AND benefit_type = 'COUPON'`;
    const requestId = randomUUID();
    const input = { requestId, items: [{ skuId: "SKU-MUG", quantity: 2 }], couponCode: grant?.code };
    const first = await createOrder(app.db, paid.userId, input);
    // The order that earned the coupon is refunded in full automatically (say it ran short): the coupon, spent, is
    // revoked by that refund, as the automatic refund's consumer does.
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const refundNo = `R-${randomUUID()}`;
    await caller.refunds.create({ orderId: paid.orderId, refundNo, amountCents: 100 });
    const [refund] = await database.sql<
      { id: string }[]
    >`SELECT id FROM refund_order WHERE refund_no = ${refundNo}`;
    const grantingOrder = { userId: paid.userId, orderId: paid.orderId };
    expect(await app.db.transaction((tx) => revokeCoupon(tx, grantingOrder, refund?.id ?? ""))).toBe(true);
    await expireKeys(database, paid.userId);

    const again = await createOrder(app.db, paid.userId, input);
    expect(again).toMatchObject({ orderId: first.orderId, replayed: true });
    expect(await recordOf(database, paid.userId, requestId)).toEqual({
      status: "SUCCESS",
      biz_id: first.orderId,
    });
    // Another request id spending it is refused.
    await expect(
      createOrder(app.db, paid.userId, { ...input, requestId: randomUUID() }),
    ).rejects.toMatchObject({
      code: "COUPON_NOT_APPLICABLE",
    });
  });
});

describe("a line refund rejected before the order shipped, retried after", () => {
  /** A paid order of 2 units whose refund of 1 unit MockPay rejects, then the order fulfilled (it ships 2). */
  async function shippedWithRejectedRefund(app: AppContext, mockPay: MockPayContext, database: TestDatabase) {
    const skuId = await scarceSku(app.db, 10);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    await mockPayFault(mockPay, paid.outTradeNo, "REJECT_REFUNDS", 1);
    const refundNo = `R-${randomUUID()}`;
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await caller.refunds.create({ orderId: paid.orderId, refundNo, lines: [{ skuId, quantity: 1 }] });
    await consumeOrderEvents(app.db, paid.orderId);
    const [row] = await database.sql<{ provider_refund_no: string; status: string; shipped: number }[]>`
      SELECT r.provider_refund_no, r.status,
             (SELECT sum(quantity)::int FROM shipment_line WHERE order_id = r.order_id) AS shipped
        FROM refund_order r WHERE r.refund_no = ${refundNo}`;
    expect(row).toMatchObject({ status: "REFUND_FAILED", shipped: 2 });
    return { ...paid, skuId, refundNo, providerRefundNo: row?.provider_refund_no ?? "" };
  }

  test("its Retry asks for the goods back instead of paying for a unit the shopper keeps", async ({
    app,
    mockPay,
    database,
  }) => {
    const order = await shippedWithRejectedRefund(app, mockPay, database);
    // Without the Retry's check, this is what reconciliation would have seen (the refund paying for a shipped
    // unit): the rule is checked whenever the refund was recorded.
    await database.sql`UPDATE refund_order SET status = 'REFUND_SUCCESS' WHERE refund_no = ${order.refundNo}`;
    expect(await violationsOf(app.db, order.orderId)).toContain(
      "goods-conserved: refunds pay for more units than never shipped (goods with the shopper, not received back)",
    );
    await database.sql`UPDATE refund_order SET status = 'REFUND_FAILED' WHERE refund_no = ${order.refundNo}`;

    expect(await retryFailedRefund(app.db, order.providerRefundNo, app.payments)).toBe(
      "REFUND_AWAITING_GOODS",
    );
    await deliverAll(mockPay);
    const [atProvider] = await database.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM provider_refund WHERE refund_no = ${order.providerRefundNo} AND status = 'SUCCEEDED'`;
    expect(atProvider?.n).toBe(0);

    // The kettle comes back: then it is refunded, and its unit goes back to stock.
    await receiveReturn(app.db, order.providerRefundNo, `scan-${randomUUID()}`, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, order.orderId);
    const [after] = await database.sql`
      SELECT r.status, (SELECT stock FROM sku WHERE id = ${order.skuId}) AS stock
        FROM refund_order r WHERE r.refund_no = ${order.refundNo}`;
    expect(after).toEqual({ status: "REFUND_SUCCESS", stock: 9 });
    expect(await violationsOf(app.db, order.orderId)).toEqual([]);
  });

  test("a line refund in flight when the order shipped, rejected after: its Retry pays for the unit left behind", async ({
    app,
    mockPay,
    database,
  }) => {
    const { skuId, orderId, refundNo, providerRefundNo } = await unitLeftBehindForRejectedRefund(
      app,
      mockPay,
    );
    await retryFailedRefund(app.db, providerRefundNo, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, orderId);
    const [after] = await database.sql`
      SELECT r.status, (SELECT stock FROM sku WHERE id = ${skuId}) AS stock
        FROM refund_order r WHERE r.refund_no = ${refundNo}`;
    expect(after).toEqual({ status: "REFUND_SUCCESS", stock: 9 });
    expect(await violationsOf(app.db, orderId)).toEqual([]);
  });
});

describe("a return whose goods came back, rejected by MockPay, retried", () => {
  test("is retried as a refund: its goods are here, nobody is asked for them again", async ({
    app,
    mockPay,
    database,
  }) => {
    // Found by the SPIN model with goods (the Retry's check asked a received return for its goods again).
    const skuId = await scarceSku(app.db, 10);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    await consumeOrderEvents(app.db, paid.orderId);
    const refundNo = `R-${randomUUID()}`;
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await caller.refunds.create({ orderId: paid.orderId, refundNo, lines: [{ skuId, quantity: 1 }] });
    const [awaiting] = await database.sql<{ provider_refund_no: string; status: string }[]>`
      SELECT provider_refund_no, status FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(awaiting?.status).toBe("REFUND_AWAITING_GOODS");
    const providerRefundNo = awaiting?.provider_refund_no ?? "";
    await mockPayFault(mockPay, paid.outTradeNo, "REJECT_REFUNDS", 1);
    await receiveReturn(app.db, providerRefundNo, `scan-${randomUUID()}`, app.payments);
    const [rejected] = await database.sql`SELECT status FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(rejected?.status).toBe("REFUND_FAILED");

    expect(await retryFailedRefund(app.db, providerRefundNo, app.payments)).toBe("REFUND_PROCESSING");
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    const [after] = await database.sql`
      SELECT r.status, (SELECT stock FROM sku WHERE id = ${skuId}) AS stock
        FROM refund_order r WHERE r.refund_no = ${refundNo}`;
    expect(after).toEqual({ status: "REFUND_SUCCESS", stock: 9 });
    expect(await violationsOf(app.db, paid.orderId)).toEqual([]);
  });
});

describe("a line refund that succeeded before the order shipped, its stock not yet given back", () => {
  test("the shipment leaves its unit behind, and the stock-return consumer gives it back after", async ({
    app,
    mockPay,
    database,
  }) => {
    // Found by npm run interleavings (benefit-reversal × its redelivery, settled): the shipping consumer ran
    // before the stock-return consumer, and shipped the refunded unit too.
    const skuId = await scarceSku(app.db, 10);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    const [orderPaid] = await database.sql<{ id: string }[]>`
      SELECT id FROM outbox_event WHERE aggregate_id = ${paid.orderId} AND event_type = 'OrderPaid'`;
    await handleConsumeJob(app.db, { eventId: orderPaid?.id ?? "", userId: paid.userId, consumer: "stock" });
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await caller.refunds.create({
      orderId: paid.orderId,
      refundNo: `R-${randomUUID()}`,
      lines: [{ skuId, quantity: 1 }],
    });
    await deliverAll(mockPay);
    const [stockDeducted] = await database.sql<{ id: string }[]>`
      SELECT id FROM outbox_event WHERE aggregate_id = ${paid.orderId} AND event_type = 'StockDeducted'`;
    await handleConsumeJob(app.db, {
      eventId: stockDeducted?.id ?? "",
      userId: paid.userId,
      consumer: "shipping",
    });
    const [shipped] = await database.sql<{ quantity: number }[]>`
      SELECT quantity FROM shipment_line WHERE order_id = ${paid.orderId}`;
    expect(shipped?.quantity).toBe(1);

    await consumeOrderEvents(app.db, paid.orderId);
    const [sku] = await database.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`;
    expect(sku?.stock).toBe(9);
    expect(await violationsOf(app.db, paid.orderId)).toEqual([]);
  });
});

describe("a refund the provider paid while it was recorded here as a return awaiting its goods", () => {
  test("the provider's word wins: it succeeds, its money moves once", async ({ app, mockPay, database }) => {
    // Two sends of one refund raced (the rejection recorded first), then its Retry made it a return: the
    // provider's success, late, still lands.
    const skuId = await scarceSku(app.db, 10);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    await consumeOrderEvents(app.db, paid.orderId);
    const refundNo = `R-${randomUUID()}`;
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const refund = await caller.refunds.create({
      orderId: paid.orderId,
      refundNo,
      lines: [{ skuId, quantity: 1 }],
    });
    const [row] = await database.sql<{ provider_refund_no: string; status: string }[]>`
      SELECT provider_refund_no, status FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(row?.status).toBe("REFUND_AWAITING_GOODS");
    const [payment] = await database.sql<{ transaction_id: string }[]>`
      SELECT transaction_id FROM payment_order WHERE out_trade_no = ${paid.outTradeNo}`;
    const fact = {
      ...factAbout(app, { outTradeNo: paid.outTradeNo, amountCents: refund.amountCents, currency: "USD" }),
      type: "refund.succeeded",
      transaction_id: payment?.transaction_id ?? null,
      refund_no: row?.provider_refund_no,
    };
    expect((await notifyAsProvider(app, fact)).httpStatus).toBe(200);
    expect((await notifyAsProvider(app, { ...fact, id: `evt_${randomUUID()}` })).httpStatus).toBe(200);
    const [after] = await database.sql`
      SELECT r.status, (SELECT count(*)::int FROM ledger_transfer t WHERE t.refund_id = r.id AND t.to_account = 'shopper') AS paid
        FROM refund_order r WHERE r.refund_no = ${refundNo}`;
    expect(after).toEqual({ status: "REFUND_SUCCESS", paid: 1 });
  });
});
