import { and, eq, inArray, sql } from "drizzle-orm";
import { releaseCoupon } from "~/server/coupons/coupons";
import type { Tx } from "~/server/db/client";
import {
  orders,
  outboxEvent,
  paymentOrder,
  REFUNDS_THAT_RETURN_NOTHING,
  refundOrder,
} from "~/server/db/schema";
import { isOrder } from "~/server/orders/order-ref";
import { ok, refuse, type Verdict } from "~/server/payments/verdict";
import type { NotificationBody } from "~/shared/provider-contract";
import { supersedeFailedRefunds } from "./supersede";

/**
 * The provider says a refund succeeded (a notification, or the answer to a status
 * query): → SUCCESS once; the order becomes REFUNDED when the successes add up to what
 * was paid; RefundSucceeded goes to the outbox in the same transaction.
 *
 * The provider's word is the fact, also for a refund recorded here as rejected (REFUND_FAILED, or
 * REFUND_SUPERSEDED since): the provider may reject one request for a refund number and accept another
 * (two submissions of one refund raced, and the rejection's answer was recorded first), and the money
 * has gone back either way. The provider never refunds more than was paid, so other rejected refunds
 * this one leaves no room for are superseded here.
 */
export async function applyRefundSucceeded(
  tx: Tx,
  payment: typeof paymentOrder.$inferSelect,
  n: NotificationBody,
): Promise<Verdict> {
  if (!n.refund_no) return refuse("MALFORMED", 400, "a refund notification needs refund_no");
  // The provider knows the refund by the merchant's provider refund number, not the shopper's.
  const [refund] = await tx.select().from(refundOrder).where(eq(refundOrder.providerRefundNo, n.refund_no));
  if (!refund || refund.paymentId !== payment.id || refund.userId !== payment.userId) {
    return refuse("UNKNOWN_PAYMENT", 404, `no refund ${n.refund_no} for payment ${n.out_trade_no}`);
  }
  if (refund.amountCents !== n.amount_cents || refund.currency !== n.currency) {
    return refuse(
      "AMOUNT_MISMATCH",
      400,
      `refund ${n.refund_no}: expected ${refund.amountCents} ${refund.currency}, notified ${n.amount_cents} ${n.currency}`,
      true,
    );
  }
  // One refund completes at a time per payment (recordRefund takes the same lock): two refunds
  // succeeding together would each sum the successes without the other's and both miss "fully refunded".
  await tx
    .select({ id: paymentOrder.id })
    .from(paymentOrder)
    .where(and(eq(paymentOrder.userId, payment.userId), eq(paymentOrder.id, payment.id)))
    .for("update");
  // Then the order's, as fulfilment takes it: a shipment and this refund take turns on the order, and the
  // refund's time is read once the order is ours (clock_timestamp, not the transaction's start), so
  // "shipped before the refund" in reconciliation means what happened first on the order.
  const order = { userId: payment.userId, orderId: payment.orderId };
  await tx
    .select({ id: orders.id })
    .from(orders)
    .where(isOrder(orders, orders.id, order))
    .for("update");
  const [moved] = await tx
    .update(refundOrder)
    .set({ status: "REFUND_SUCCESS", updatedAt: sql`clock_timestamp()` })
    .where(
      and(
        eq(refundOrder.userId, refund.userId),
        eq(refundOrder.id, refund.id),
        inArray(refundOrder.status, ["REFUND_CREATED", "REFUND_PROCESSING", ...REFUNDS_THAT_RETURN_NOTHING]),
      ),
    )
    .returning({ id: refundOrder.id });
  if (!moved) {
    // Read again: the status read before the payment's lock may be the one a concurrent copy just changed.
    const [current] = await tx
      .select({ status: refundOrder.status })
      .from(refundOrder)
      .where(and(eq(refundOrder.userId, refund.userId), eq(refundOrder.id, refund.id)));
    return ok("DUPLICATE", `refund already processed (${current?.status})`);
  }
  // Cheap, and right whatever this refund was before (the status read above may be stale): a refund
  // that was rejected here and succeeded after all leaves less room for the other rejected ones.
  await supersedeFailedRefunds(tx, payment, `refund ${refund.refundNo} succeeded at the provider`);
  // A late payment's refund returns money that was never the order's: the order and its fulfilment stay as they are.
  if (payment.status === "PAID_LATE")
    return ok("PROCESSED", "late payment refunded; the order keeps its state");
  const [totals] = await tx
    .select({ refunded: sql<string>`coalesce(sum(${refundOrder.amountCents}), 0)` })
    .from(refundOrder)
    .where(
      and(
        eq(refundOrder.userId, payment.userId),
        eq(refundOrder.paymentId, payment.id),
        eq(refundOrder.status, "REFUND_SUCCESS"),
      ),
    );
  const fullyRefunded = Number(totals?.refunded ?? 0) === payment.amountCents;
  if (fullyRefunded) {
    await tx
      .update(orders)
      .set({ status: "REFUNDED", updatedAt: sql`clock_timestamp()` })
      .where(
        and(isOrder(orders, orders.id, order), inArray(orders.status, ["PAID", "SHIPPED", "STOCK_SHORT"])),
      );
    // All its money went back: the coupon it spent comes back too.
    await releaseCoupon(tx, order);
  }
  await tx
    .insert(outboxEvent)
    .values({
      userId: payment.userId,
      eventType: "RefundSucceeded",
      aggregateType: "order",
      aggregateId: payment.orderId,
      dedupeKey: `RefundSucceeded:${refund.providerRefundNo}`,
      payload: {
        orderId: payment.orderId,
        refundId: refund.id,
        refundNo: refund.refundNo,
        amountCents: refund.amountCents,
        fullyRefunded,
      },
    })
    .onConflictDoNothing({ target: [outboxEvent.userId, outboxEvent.dedupeKey] });
  return ok("PROCESSED", fullyRefunded ? "refund succeeded; order fully refunded" : "refund succeeded");
}
