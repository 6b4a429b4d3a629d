import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import type { AppContext } from "~/server/app-context";
import { paymentOrder, refundOrder } from "~/server/db/schema";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { reconcile } from "~/server/reconciliation/reconcile";
import { applyRefundSucceeded } from "~/server/refunds/complete-refund";
import { createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, payThroughProvider } from "./support/scenarios";

/** Fulfilment follows the order's state: a full refund that lands first means nothing is taken, granted or shipped. */
const items = [{ skuId: "SKU-ESPRESSO", quantity: 2 }];

async function eventIds(database: TestDatabase, orderId: string, type: string) {
  return (
    await database.sql<
      { id: string }[]
    >`SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = ${type}`
  ).map((row) => row.id);
}

/** Runs every consumer of every event of the order, in the order the queue might: whatever is there now. */
async function consumeEverything(app: AppContext, database: TestDatabase, orderId: string) {
  const consumers: Record<string, string[]> = {
    OrderPaid: ["stock", "benefits"],
    StockDeducted: ["shipping"],
    StockShort: ["auto-refund"],
    RefundSucceeded: ["stock-return", "benefit-reversal"],
  };
  for (let round = 0; round < 3; round++) {
    for (const [type, names] of Object.entries(consumers)) {
      for (const eventId of await eventIds(database, orderId, type)) {
        for (const consumer of names) await handleConsumeJob(app.db, { eventId, consumer });
      }
    }
  }
}

async function holdings(database: TestDatabase, orderId: string) {
  const [row] = await database.sql`
    SELECT (SELECT status FROM orders WHERE id = ${orderId}) AS status,
           (SELECT coalesce(sum(quantity), 0)::int FROM stock_deduct_record WHERE order_id = ${orderId})
             - (SELECT coalesce(sum(quantity), 0)::int FROM stock_return_record WHERE order_id = ${orderId}) AS stock_held,
           (SELECT count(*)::int FROM benefit_grant WHERE order_id = ${orderId})
             - (SELECT count(*)::int FROM benefit_reversal WHERE order_id = ${orderId}) AS benefits_held,
           (SELECT count(*)::int FROM shipment WHERE order_id = ${orderId}) AS shipments`;
  return row;
}

async function refundInFull(app: AppContext, paid: { userId: string; orderId: string; amountCents: number }) {
  await createCaller({ app, userId: paid.userId, requestId: randomUUID() }).refunds.create({
    orderId: paid.orderId,
    refundNo: `R-${randomUUID()}`,
    amountCents: paid.amountCents,
  });
}

describe("fulfilment follows the order's state", () => {
  test("a full refund while OrderPaid waits in the queue: nothing deducted, granted or shipped", async ({
    app,
    mockPay,
    database,
  }) => {
    const [stockBefore] = await database.sql`SELECT stock FROM sku WHERE id = 'SKU-ESPRESSO'`;
    const paid = await payThroughProvider(app, mockPay, items);
    await refundInFull(app, paid);
    await deliverAll(mockPay);
    await consumeEverything(app, database, paid.orderId);
    expect(await holdings(database, paid.orderId)).toEqual({
      status: "REFUNDED",
      stock_held: 0,
      benefits_held: 0,
      shipments: 0,
    });
    const [ledger] = await database.sql`
      SELECT (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ${paid.orderId}) AS deductions,
             (SELECT count(*)::int FROM benefit_grant WHERE order_id = ${paid.orderId}) AS grants`;
    expect(ledger).toEqual({ deductions: 0, grants: 0 });
    const [stockAfter] = await database.sql`SELECT stock FROM sku WHERE id = 'SKU-ESPRESSO'`;
    expect(stockAfter?.stock).toBe(stockBefore?.stock);
  });

  test("a full refund racing the stock and benefit consumers, 10 orders: every one ends holding nothing", async ({
    app,
    mockPay,
    database,
  }) => {
    const orders = await Promise.all(
      Array.from({ length: 10 }, () => payThroughProvider(app, mockPay, items)),
    );
    await Promise.all(orders.map((paid) => refundInFull(app, paid)));
    // The refund notifications arrive while OrderPaid is being consumed.
    await Promise.all([
      deliverAll(mockPay),
      ...orders.map(async (paid) => {
        for (const eventId of await eventIds(database, paid.orderId, "OrderPaid")) {
          await Promise.all([
            handleConsumeJob(app.db, { eventId, consumer: "stock" }),
            handleConsumeJob(app.db, { eventId, consumer: "benefits" }),
          ]);
        }
      }),
    ]);
    await deliverAll(mockPay);
    for (const paid of orders) await consumeEverything(app, database, paid.orderId);
    for (const paid of orders) {
      const held = await holdings(database, paid.orderId);
      expect(held, paid.orderId).toMatchObject({ status: "REFUNDED", stock_held: 0, benefits_held: 0 });
    }
    // Consumers were driven by hand here (no relay), so the outbox is not relayed; every other invariant holds.
    const report = await reconcile(app.db, { lagSeconds: 0 });
    const broken = report.invariants.filter((i) => i.name !== "events-delivered");
    expect(broken.flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`))).toEqual([]);
  });

  test("a refund completing while the order ships: the shipment came first, and reconciliation agrees", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, items);
    for (const eventId of await eventIds(database, paid.orderId, "OrderPaid")) {
      await handleConsumeJob(app.db, { eventId, consumer: "stock" });
    }
    await refundInFull(app, paid);
    const [refund] = await app.db.select().from(refundOrder).where(eq(refundOrder.orderId, paid.orderId));
    if (!refund) throw new Error("no refund");
    // The refund's completion begins, then the shipment is made and committed before it reaches the order.
    await app.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT 1`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      for (const eventId of await eventIds(database, paid.orderId, "StockDeducted")) {
        await handleConsumeJob(app.db, { eventId, consumer: "shipping" });
      }
      const [payment] = await tx.select().from(paymentOrder).where(eq(paymentOrder.orderId, paid.orderId));
      if (!payment) throw new Error("no payment");
      const verdict = await applyRefundSucceeded(tx, payment, {
        id: `evt_${randomUUID()}`,
        type: "refund.succeeded",
        app_id: "app_test",
        out_trade_no: payment.outTradeNo,
        transaction_id: payment.transactionId,
        amount_cents: refund.amountCents,
        currency: refund.currency,
        created_at: new Date().toISOString(),
        refund_no: refund.providerRefundNo,
      });
      expect(verdict.outcome).toBe("PROCESSED");
    });
    expect(await holdings(database, paid.orderId)).toMatchObject({ status: "REFUNDED", shipments: 1 });
    const report = await reconcile(app.db, { lagSeconds: 0 });
    const netZero = report.invariants.find((i) => i.name === "refunded-orders-net-zero");
    expect(netZero?.violations.map((v) => v.message)).not.toContain("shipped after it was refunded");
  });
});
