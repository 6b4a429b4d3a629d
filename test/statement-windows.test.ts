import { randomUUID } from "node:crypto";
import type postgres from "postgres";
import { revokeCoupon } from "~/server/coupons/coupons";
import { createOrder } from "~/server/orders/create-order";
import { createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import {
  consumeOrderEvents,
  factAbout,
  notifyAsProvider,
  orderAwaitingPayment,
  payThroughProvider,
  scarceSku,
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

    const again = await createOrder(app.db, userId, { requestId, items: [{ skuId, quantity: 1 }] });
    expect(again).toMatchObject({ orderId: first.orderId, replayed: true });
    expect(await recordOf(database, userId, requestId)).toEqual({ status: "SUCCESS", biz_id: first.orderId });
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
