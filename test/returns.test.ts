import { randomUUID } from "node:crypto";
import type { MockPayContext } from "~/mockpay/server/context";
import type { AppContext } from "~/server/app-context";
import { reconcile } from "~/server/reconciliation/reconcile";
import { cancelReturn, receiveReturn } from "~/server/refunds/returns";
import { createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { consumeOrderEvents, deliverAll, payThroughProvider, scarceSku } from "./support/scenarios";

/**
 * Goods come back only when they come back (issue 29): lines of an order that has shipped are a return,
 * refunded once the goods are received; a line refund costs what its lines were paid; money alone returns
 * no goods; and an order that keeps less than the coupon it earned loses the coupon.
 */

async function stockOf(database: TestDatabase, skuId: string) {
  const [row] = await database.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`;
  return row?.stock;
}

async function refund(database: TestDatabase, refundNo: string) {
  const [row] = await database.sql<{ status: string; provider_refund_no: string; amount: number }[]>`
    SELECT status, provider_refund_no, amount_cents::int AS amount FROM refund_order WHERE refund_no = ${refundNo}`;
  if (!row) throw new Error(`no refund ${refundNo}`);
  return row;
}

const violations = async (db: Parameters<typeof reconcile>[0]) =>
  (await reconcile(db, { lagSeconds: 0 })).invariants
    .filter((i) => i.name !== "events-delivered")
    .flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`));

interface World {
  app: AppContext;
  mockPay: MockPayContext;
  database: TestDatabase;
}

/** A shopper's paid order of two kettles (a SKU of its own), fulfilled and shipped. */
async function shippedKettles({ app, mockPay, database }: World) {
  const skuId = await scarceSku(app.db, 60, 5400);
  const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
  await consumeOrderEvents(app.db, paid.orderId);
  const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
  expect(order?.status).toBe("SHIPPED");
  const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
  return { ...paid, skuId, caller };
}

describe("a refund of goods that have shipped", () => {
  test("two kettles for 1 cent: refused (lines cost what they were paid), nothing written, stock as it was", async ({
    app,
    mockPay,
    database,
  }) => {
    const order = await shippedKettles({ app, mockPay, database });
    const stock = await stockOf(database, order.skuId);
    await expect(
      order.caller.refunds.create({
        orderId: order.orderId,
        refundNo: randomUUID(),
        lines: [{ skuId: order.skuId, quantity: 2 }],
        amountCents: 1,
      }),
    ).rejects.toMatchObject({
      cause: { code: "REFUND_LINES_INVALID", details: { meta: { linesCents: 10_800 } } },
    });
    expect(await stockOf(database, order.skuId)).toBe(stock);
    const [rows] =
      await database.sql`SELECT count(*)::int AS n FROM refund_order WHERE order_id = ${order.orderId}`;
    expect(rows?.n).toBe(0);
  });

  test("a full refund by amount after shipping: the money goes back, the goods stay with the shopper", async ({
    app,
    mockPay,
    database,
  }) => {
    const order = await shippedKettles({ app, mockPay, database });
    const stock = await stockOf(database, order.skuId);
    await order.caller.refunds.create({
      orderId: order.orderId,
      refundNo: randomUUID(),
      amountCents: order.amountCents,
    });
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, order.orderId);
    const [after] = await database.sql`SELECT status FROM orders WHERE id = ${order.orderId}`;
    expect(after?.status).toBe("REFUNDED");
    expect(await stockOf(database, order.skuId)).toBe(stock);
    expect(await violations(app.db)).toEqual([]);
  });

  test("a return: asked, nothing moves; received (ten scans at once), the stock comes back and the money goes, once", async ({
    app,
    mockPay,
    database,
  }) => {
    const order = await shippedKettles({ app, mockPay, database });
    const stock = await stockOf(database, order.skuId);
    const refundNo = randomUUID();
    const asked = await order.caller.refunds.create({
      orderId: order.orderId,
      refundNo,
      lines: [{ skuId: order.skuId, quantity: 1 }],
    });
    expect(asked).toMatchObject({ status: "REFUND_AWAITING_GOODS", amountCents: 5400 });
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, order.orderId);
    const awaiting = await refund(database, refundNo);
    expect(awaiting.status).toBe("REFUND_AWAITING_GOODS");
    expect(await stockOf(database, order.skuId)).toBe(stock);
    const [atProvider] =
      await database.sql`SELECT count(*)::int AS n FROM provider_refund WHERE refund_no = ${awaiting.provider_refund_no}`;
    expect(atProvider?.n).toBe(0);
    // Its room is taken meanwhile: the rest of the order, not more, can still be refunded.
    await expect(
      order.caller.refunds.create({
        orderId: order.orderId,
        refundNo: randomUUID(),
        amountCents: order.amountCents,
      }),
    ).rejects.toMatchObject({ cause: { code: "REFUND_EXCEEDS_PAID" } });

    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        receiveReturn(app.db, awaiting.provider_refund_no, `scan-${i}`, app.payments),
      ),
    );
    expect(answers.filter((a) => a.moved)).toHaveLength(1);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, order.orderId);
    expect((await refund(database, refundNo)).status).toBe("REFUND_SUCCESS");
    expect(await stockOf(database, order.skuId)).toBe((stock ?? 0) + 1);
    const [counts] = await database.sql`
      SELECT (SELECT count(*)::int FROM return_receipt WHERE order_id = ${order.orderId}) AS receipts,
             (SELECT coalesce(sum(quantity), 0)::int FROM stock_return_record WHERE order_id = ${order.orderId}) AS returned,
             (SELECT count(*)::int FROM provider_refund WHERE refund_no = ${awaiting.provider_refund_no}) AS refunds,
             (SELECT status FROM orders WHERE id = ${order.orderId}) AS order`;
    expect(counts).toEqual({ receipts: 1, returned: 1, refunds: 1, order: "SHIPPED" });
    expect(await violations(app.db)).toEqual([]);

    // Goods broken deliberately: the receipt deleted, the stock it gave back is named.
    await database.sql`ALTER TABLE return_receipt DISABLE TRIGGER ALL`;
    const [receipt] =
      await database.sql`DELETE FROM return_receipt WHERE order_id = ${order.orderId} RETURNING *`;
    const report = await reconcile(app.db, { lagSeconds: 0 });
    const goods = report.invariants.find((i) => i.name === "goods-conserved")?.violations ?? [];
    expect(goods.map((v) => v.message)).toEqual([
      "a shipped order's stock is not what it shipped less what came back",
      "stock given back for a return beyond what was received",
      "refunds pay for more units than never shipped (goods with the shopper, not received back)",
    ]);
    expect(goods[0]?.rows).toEqual([
      expect.objectContaining({
        order_id: order.orderId,
        sku_id: order.skuId,
        shipped: 2,
        received: 0,
        held: 1,
      }),
    ]);
    await database.sql`INSERT INTO return_receipt (user_id, refund_id, order_id, sku_id, quantity, receipt_key)
                       VALUES (${receipt?.user_id}, ${receipt?.refund_id}, ${receipt?.order_id}, ${receipt?.sku_id}, ${receipt?.quantity}, ${receipt?.receipt_key})`;
    await database.sql`ALTER TABLE return_receipt ENABLE TRIGGER ALL`;
    expect(await violations(app.db)).toEqual([]);
  });

  test("a return whose goods never came is cancelled: nothing refunded, its room back", async ({
    app,
    mockPay,
    database,
  }) => {
    const order = await shippedKettles({ app, mockPay, database });
    const refundNo = randomUUID();
    await order.caller.refunds.create({
      orderId: order.orderId,
      refundNo,
      lines: [{ skuId: order.skuId, quantity: 2 }],
    });
    const awaiting = await refund(database, refundNo);
    expect(await cancelReturn(app.db, awaiting.provider_refund_no)).toEqual({
      status: "REFUND_CANCELLED",
      moved: true,
    });
    expect(await receiveReturn(app.db, awaiting.provider_refund_no, "late-scan", app.payments)).toEqual({
      status: "REFUND_CANCELLED",
      moved: false,
    });
    // The whole amount can be refunded again (by amount: the goods stay out).
    await order.caller.refunds.create({
      orderId: order.orderId,
      refundNo: randomUUID(),
      amountCents: order.amountCents,
    });
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, order.orderId);
    const [after] = await database.sql`SELECT status FROM orders WHERE id = ${order.orderId}`;
    expect(after?.status).toBe("REFUNDED");
    expect(await violations(app.db)).toEqual([]);
  });

  test("the order keeps less than the coupon it earned: 1249 of 1250 cents revokes the coupon", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    await consumeOrderEvents(app.db, paid.orderId);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const [coupon] = await caller.coupons.list();
    expect(coupon?.state).toBe("AVAILABLE");
    await caller.refunds.create({ orderId: paid.orderId, refundNo: randomUUID(), amountCents: 1249 });
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    expect((await caller.coupons.list())[0]?.state).toBe("REVOKED");
    await expect(
      caller.orders.create({
        requestId: randomUUID(),
        items: [{ skuId: "SKU-MUG", quantity: 1 }],
        couponCode: coupon?.code,
      }),
    ).rejects.toMatchObject({ cause: { code: "COUPON_NOT_APPLICABLE" } });
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
    expect(order?.status).toBe("SHIPPED");
    expect(await violations(app.db)).toEqual([]);
  });
});

describe("a refund of goods before they ship", () => {
  test("works as before: the line's stock comes back when the refund succeeds, and it does not ship", async ({
    app,
    mockPay,
    database,
  }) => {
    const skuId = await scarceSku(app.db, 60, 5400);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    const stock = await stockOf(database, skuId);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const asked = await caller.refunds.create({
      orderId: paid.orderId,
      refundNo: randomUUID(),
      lines: [{ skuId, quantity: 1 }],
    });
    expect(asked.status).not.toBe("REFUND_AWAITING_GOODS");
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    // One kettle was deducted and shipped; the refunded one never left.
    expect(await stockOf(database, skuId)).toBe((stock ?? 0) - 1);
    const lines =
      await database.sql`SELECT sku_id, quantity FROM shipment_line WHERE order_id = ${paid.orderId}`;
    expect(lines).toEqual([{ sku_id: skuId, quantity: 1 }]);
    expect(await violations(app.db)).toEqual([]);
  });
});
