import { randomBytes } from "node:crypto";
import { and, eq, inArray, sql } from "drizzle-orm";
import { revokeCoupon } from "~/server/coupons/coupons";
import type { Tx } from "~/server/db/client";
import { ORDER_MACHINE } from "~/server/db/machines";
import { isOrder, type OrderRef } from "~/server/db/order-ref";
import {
  benefitGrant,
  benefitReversal,
  orders,
  outboxEvent,
  shipment,
  shipmentLine,
  sku,
  stockDeductRecord,
  stockReturnRecord,
} from "~/server/db/schema";
import { refundableOf } from "~/server/ledger/ledger";
import { lockPaidPayment, recordRefund } from "~/server/refunds/create-refund";
import type { TransactionSteps } from "~/shared/transaction-steps";
import type { Consumer, OutboxEvent } from "./consume";
import {
  hasShipped,
  pointsHeld,
  pointsTarget,
  stockHeld,
  stockTarget,
  unitsBeingRefunded,
  unitsOfRefund,
} from "./holdings";

/** Events a consumer can raise in turn, in the same transaction as its effect. */
async function raise(
  tx: Tx,
  eventType: string,
  { userId, orderId }: OrderRef,
  payload: Record<string, unknown>,
) {
  await tx
    .insert(outboxEvent)
    .values({
      userId,
      eventType,
      aggregateType: "order",
      aggregateId: orderId,
      dedupeKey: `${eventType}:${orderId}`,
      payload: { orderId, ...payload },
    })
    .onConflictDoNothing({ target: [outboxEvent.userId, outboxEvent.dedupeKey] });
}

/** The order an event is about: its shopper is the event's own. */
const orderOf = (event: OutboxEvent): OrderRef => ({
  userId: event.userId,
  orderId: (event.payload as { orderId: string }).orderId,
});

/**
 * The order's status, locked until the consumer's transaction ends. A refund completing
 * at the same moment updates the same row, so the two take turns: the consumer sees the
 * order PAID and acts (the refund's consumers then give it back), or sees it REFUNDED and
 * does nothing. Fulfilment follows the order's state machine, never the event alone.
 */
async function lockOrderStatus(tx: Tx, order: OrderRef) {
  const [locked] = await tx
    .select({ status: orders.status })
    .from(orders)
    .where(isOrder(orders, orders.id, order))
    .for("update");
  return locked?.status;
}

class StockShort extends Error {
  constructor(readonly skuId: string) {
    super(`not enough ${skuId}`);
  }
}

/**
 * Deducts stock once per (order, SKU): the deduct record's unique key is the
 * effect's own guard, and the conditional UPDATE never lets stock go below
 * zero. If any line is short, nothing is deducted and the order is marked
 * STOCK_SHORT (to be refunded) instead of overselling.
 */
export const stockConsumer: Consumer = {
  name: "stock",
  eventTypes: ["OrderPaid"],
  async apply(tx, event) {
    const order = orderOf(event);
    // Only a PAID order takes stock: one refunded (or closed) before this ran takes nothing.
    const status = await lockOrderStatus(tx, order);
    if (status !== "PAID") return "SKIPPED";
    // What it should hold: lines a refund gave back before this ran are not taken. In SKU order: one lock
    // order for every transaction, no deadlocks between orders sharing SKUs.
    const lines = [...(await stockTarget(tx, order, status))]
      .filter(([, quantity]) => quantity > 0)
      .map(([skuId, quantity]) => ({ skuId, quantity }));
    if (lines.length === 0) return "SKIPPED";
    try {
      await tx.transaction(async (savepoint) => {
        for (const line of lines) {
          const [claimed] = await savepoint
            .insert(stockDeductRecord)
            .values({ ...order, skuId: line.skuId, quantity: line.quantity })
            .onConflictDoNothing({
              target: [stockDeductRecord.userId, stockDeductRecord.orderId, stockDeductRecord.skuId],
            })
            .returning({ id: stockDeductRecord.id });
          if (!claimed) continue;
          const [deducted] = await savepoint
            .update(sku)
            .set({ stock: sql`${sku.stock} - ${line.quantity}` })
            .where(and(eq(sku.id, line.skuId), sql`${sku.stock} >= ${line.quantity}`))
            .returning({ id: sku.id });
          if (!deducted) throw new StockShort(line.skuId);
        }
      });
    } catch (error) {
      if (!(error instanceof StockShort)) throw error;
      await tx
        .update(orders)
        .set({ status: ORDER_MACHINE.transitions.runShort.to, updatedAt: sql`now()` })
        .where(
          and(
            isOrder(orders, orders.id, order),
            inArray(orders.status, ORDER_MACHINE.transitions.runShort.from),
          ),
        );
      await raise(tx, "StockShort", order, { skuId: error.skuId });
      return "SKIPPED";
    }
    await raise(tx, "StockDeducted", order, {});
    return "APPLIED";
  },
};

/** Loyalty points (one per whole currency unit) and a coupon, once per (order, benefit type). */
export const benefitsConsumer: Consumer = {
  name: "benefits",
  eventTypes: ["OrderPaid"],
  async apply(tx, event) {
    const order = orderOf(event);
    const { userId, orderId } = order;
    // Benefits go to an order that is paid and being (or been) filled; not to one refunded or short of stock.
    const status = await lockOrderStatus(tx, order);
    if (status !== "PAID" && status !== "SHIPPED") return "SKIPPED";
    // Points follow the net amount paid (a partial refund that completed first counts).
    const points = await pointsTarget(tx, order, status);
    const granted = await tx
      .insert(benefitGrant)
      .values([
        { orderId, userId, benefitType: "LOYALTY_POINTS", amount: points },
        {
          orderId,
          userId,
          benefitType: "COUPON",
          amount: 500,
          code: `THANKS-${randomBytes(4).toString("hex").toUpperCase()}`,
        },
      ])
      .onConflictDoNothing({ target: [benefitGrant.userId, benefitGrant.orderId, benefitGrant.benefitType] })
      .returning({ id: benefitGrant.id });
    return granted.length > 0 ? "APPLIED" : "SKIPPED";
  },
};

/**
 * The shipping consumer's transaction as the model takes it (model/checkout.pml, the Worker's shipment): one
 * step, every statement after the order's lock, which every other actor of the order takes too.
 */
export const SHIPPING_STEPS: TransactionSteps = {
  transaction: "shipping",
  path: "a paid order's StockDeducted, a line refund of it under way",
  statements: [
    {
      does: "claim the event for this consumer (model/idempotency.pml's)",
      matches: /message_consume_record/,
      step: null,
    },
    { does: "lock the order", matches: /from "orders" .*for update/s, step: "ship" },
    { does: "what it holds", matches: /FROM stock_deduct_record/, step: "ship" },
    { does: "what it shipped (nothing yet)", matches: /FROM shipment_line/, step: "ship" },
    { does: "what it should hold", matches: /FROM order_item/, step: "ship" },
    { does: "the units of line refunds under way", matches: /FROM refund_line/, step: "ship" },
    { does: "the shipment", matches: /insert into "shipment"/, step: "ship" },
    { does: "what it carries", matches: /insert into "shipment_line"/, step: "ship" },
    { does: "PAID -> SHIPPED", matches: /update "orders"/, step: "ship" },
    { does: "the event consumed", matches: /update "message_consume_record"/, step: null },
  ],
};

/** One shipment per PAID order, once its stock is deducted; PAID → SHIPPED by conditional update. */
export const shippingConsumer: Consumer = {
  name: "shipping",
  eventTypes: ["StockDeducted"],
  async apply(tx, event) {
    const order = orderOf(event);
    // Only a PAID order whose stock was deducted ships (this event says it was); a refunded one does not.
    const status = await lockOrderStatus(tx, order);
    if (status !== "PAID") return "SKIPPED";
    // What it carries: what the order holds and should still hold (a line refund that succeeded gives its units
    // back, whether or not the stock-return consumer has run yet), less the units of line refunds under way.
    const held = await stockHeld(tx, order);
    const target = await stockTarget(tx, order, status);
    const beingRefunded = await unitsBeingRefunded(tx, order);
    const [created] = await tx
      .insert(shipment)
      // Its time is read under the order's lock (not the transaction's start): see complete-refund.ts.
      .values({
        ...order,
        trackingNo: `TRK${randomBytes(5).toString("hex").toUpperCase()}`,
        createdAt: sql`clock_timestamp()`,
      })
      .onConflictDoNothing({ target: [shipment.userId, shipment.orderId] })
      .returning({ id: shipment.id });
    if (created && held.size > 0) {
      await tx
        .insert(shipmentLine)
        .values(
          [...held].map(([skuId, quantity]) => ({
            ...order,
            skuId,
            quantity: Math.max(
              0,
              Math.min(quantity, target.get(skuId) ?? 0) - (beingRefunded.get(skuId) ?? 0),
            ),
          })),
        )
        .onConflictDoNothing({ target: [shipmentLine.userId, shipmentLine.orderId, shipmentLine.skuId] });
    }
    await tx
      .update(orders)
      .set({ status: ORDER_MACHINE.transitions.ship.to, updatedAt: sql`now()` })
      .where(
        and(isOrder(orders, orders.id, order), inArray(orders.status, ORDER_MACHINE.transitions.ship.from)),
      );
    return created ? "APPLIED" : "SKIPPED";
  },
};

interface RefundSucceededPayload {
  orderId: string;
  refundId: string;
  fullyRefunded: boolean;
}

/**
 * Gives back the stock an order no longer should hold once a refund succeeds: all of it after a
 * full refund, the named lines after a line refund. Under the order's lock it brings what the
 * order holds (deducted less returned) down to what it should (holdings.ts), recording each
 * return once per (refund, SKU): a copy of the event, or a refund racing the stock consumer,
 * finds nothing left to give.
 */
export const stockReturnConsumer: Consumer = {
  name: "stock-return",
  // A refund that succeeded before shipping gives its stock back; goods received back from a return do.
  eventTypes: ["RefundSucceeded", "ReturnReceived"],
  async apply(tx, event) {
    const order = orderOf(event);
    const { refundId } = event.payload as RefundSucceededPayload;
    const status = await lockOrderStatus(tx, order);
    const target = await stockTarget(tx, order, status);
    // Once it has shipped, each refund gives back only its own goods: what was received back of a return,
    // or the units of a line refund the shipment left behind; never another refund's, nor goods still out.
    const own = (await hasShipped(tx, order)) ? await unitsOfRefund(tx, order, refundId) : undefined;
    let returned = 0;
    for (const [skuId, held] of await stockHeld(tx, order)) {
      const give = Math.min(
        held - (target.get(skuId) ?? 0),
        own ? (own.get(skuId) ?? 0) : Number.POSITIVE_INFINITY,
      );
      if (give <= 0) continue;
      const [claimed] = await tx
        .insert(stockReturnRecord)
        .values({ ...order, refundId, skuId, quantity: give })
        .onConflictDoNothing({
          target: [stockReturnRecord.userId, stockReturnRecord.refundId, stockReturnRecord.skuId],
        })
        .returning({ id: stockReturnRecord.id });
      if (!claimed) continue;
      await tx
        .update(sku)
        .set({ stock: sql`${sku.stock} + ${give}` })
        .where(eq(sku.id, skuId));
      returned++;
    }
    return returned > 0 ? "APPLIED" : "SKIPPED";
  },
};

/**
 * Takes back the points the net amount paid no longer earns, once per (refund, benefit type), and
 * revokes the order's coupon once it is fully refunded. A coupon already spent stays with the order
 * that spent it (coupons.ts says why).
 */
export const benefitReversalConsumer: Consumer = {
  name: "benefit-reversal",
  eventTypes: ["RefundSucceeded"],
  async apply(tx, event) {
    const order = orderOf(event);
    const { refundId } = event.payload as RefundSucceededPayload;
    const status = await lockOrderStatus(tx, order);
    const held = await pointsHeld(tx, order);
    const excess = held === undefined ? 0 : held - (await pointsTarget(tx, order, status));
    const reversed =
      excess > 0
        ? await tx
            .insert(benefitReversal)
            .values({ ...order, refundId, benefitType: "LOYALTY_POINTS", amount: excess })
            .onConflictDoNothing({
              target: [benefitReversal.userId, benefitReversal.refundId, benefitReversal.benefitType],
            })
            .returning({ id: benefitReversal.id })
        : [];
    const revoked = status === "REFUNDED" && (await revokeCoupon(tx, order, refundId));
    return reversed.length > 0 || revoked ? "APPLIED" : "SKIPPED";
  },
};

/** An order that could not be filled is refunded in full, automatically, under a refund_no derived from it. */
export const autoRefundConsumer: Consumer = {
  name: "auto-refund",
  eventTypes: ["StockShort"],
  async apply(tx, event) {
    const ref = orderOf(event);
    const { orderId } = ref;
    // The payment's lock first (recordRefund takes it too): what is left to refund is then read after any
    // refund the shopper is recording at this moment, not before it. What is left is that payment's: a late
    // payment of the same order is refunded on its own, and takes nothing from this one.
    const payment = await lockPaidPayment(tx, ref);
    if (!payment) return "SKIPPED";
    const remaining = await refundableOf(tx, payment);
    if (remaining <= 0) return "SKIPPED";
    const { existed } = await recordRefund(tx, {
      userId: ref.userId,
      orderId,
      refundNo: `sys/auto/${orderId}`,
      amountCents: remaining,
      reason: "automatic: not enough stock to fill the order",
    });
    return existed ? "SKIPPED" : "APPLIED";
  },
};

export const CONSUMERS: readonly Consumer[] = [
  stockConsumer,
  benefitsConsumer,
  shippingConsumer,
  stockReturnConsumer,
  benefitReversalConsumer,
  autoRefundConsumer,
];

export function consumersOf(eventType: string): Consumer[] {
  return CONSUMERS.filter((consumer) => consumer.eventTypes.includes(eventType));
}

export function consumerNamed(name: string): Consumer | undefined {
  return CONSUMERS.find((consumer) => consumer.name === name);
}
