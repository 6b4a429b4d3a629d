import { and, eq, inArray, sql } from "drizzle-orm";
import { releaseCoupon } from "~/server/coupons/coupons";
import type { Tx } from "~/server/db/client";
import { absorbedByUpdate, ORDER_MACHINE, REFUND_MACHINE } from "~/server/db/machines";
import { isOrder } from "~/server/db/order-ref";
import { orders, outboxEvent, type paymentOrder, refundOrder } from "~/server/db/schema";
import { paymentBalances } from "~/server/ledger/ledger";
import { ok, refuse, type Verdict } from "~/server/payments/verdict";
import type { NotificationBody } from "~/shared/provider-contract";
import { lockPayment, moveRefund, restateRejectedRefunds } from "./transitions";

/** The refund a notification names, checked against its payment, amount and currency; or the refusal. */
async function notifiedRefund(
  tx: Tx,
  payment: typeof paymentOrder.$inferSelect,
  n: NotificationBody,
): Promise<typeof refundOrder.$inferSelect | Verdict> {
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
  return refund;
}

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
  const refund = await notifiedRefund(tx, payment, n);
  if ("outcome" in refund) return refund;
  // One refund completes at a time per payment (recordRefund takes the same lock): two refunds
  // succeeding together would each sum the successes without the other's and both miss "fully refunded".
  await lockPayment(tx, payment);
  // Then the order's, as fulfilment takes it: a shipment and this refund take turns on the order, and the
  // refund's time is read once the order is ours (clock_timestamp, not the transaction's start), so
  // "shipped before the refund" in reconciliation means what happened first on the order.
  const order = { userId: payment.userId, orderId: payment.orderId };
  await tx
    .select({ id: orders.id })
    .from(orders)
    .where(isOrder(orders, orders.id, order))
    .for("update");
  const moved = await moveRefund(tx, refund, "succeed");
  if (!moved) {
    // Read again: the status read before the payment's lock may be the one a concurrent copy just changed.
    const [current] = await tx
      .select({ status: refundOrder.status })
      .from(refundOrder)
      .where(and(eq(refundOrder.userId, refund.userId), eq(refundOrder.id, refund.id)));
    return ok(
      "DUPLICATE",
      absorbedByUpdate(REFUND_MACHINE, REFUND_MACHINE.transitions.succeed, current?.status),
    );
  }
  // Cheap, and right whatever this refund was before (the status read above may be stale): a refund
  // that was rejected here and succeeded after all leaves less room for the other rejected ones.
  await restateRejectedRefunds(tx, payment, `refund ${refund.refundNo} succeeded at the provider`);
  // A late payment's refund returns money that was never the order's: the order and its fulfilment stay as they are.
  if (payment.status === "PAID_LATE")
    return ok("PROCESSED", "late payment refunded; the order keeps its state");
  // Fully refunded: nothing of the payment is held any more (the ledger's shopper balance is back to zero).
  const fullyRefunded = (await paymentBalances(tx, payment)).shopper === 0;
  if (fullyRefunded) {
    await tx
      .update(orders)
      .set({ status: ORDER_MACHINE.transitions.refundInFull.to, updatedAt: sql`clock_timestamp()` })
      .where(
        and(
          isOrder(orders, orders.id, order),
          inArray(orders.status, ORDER_MACHINE.transitions.refundInFull.from),
        ),
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

/**
 * The provider says a refund it had accepted failed after all (a notification, or the answer to a status
 * query): the money stays with the merchant, and the refund is REFUND_FAILED, awaiting a person (alert,
 * Retry on /admin), unless what other refunds took since leaves it no room (then superseded). A failure of an
 * earlier attempt than the one the provider last accepted is stale and changes nothing.
 */
export async function applyRefundFailed(
  tx: Tx,
  payment: typeof paymentOrder.$inferSelect,
  n: NotificationBody,
): Promise<Verdict> {
  const refund = await notifiedRefund(tx, payment, n);
  if ("outcome" in refund) return refund;
  await lockPayment(tx, payment);
  // The attempt this failure could be about: the one the provider accepted last while the refund waits for
  // its outcome (PROCESSING), or the next one while it is still to be sent (CREATED, e.g. after a Retry).
  const [current] = await tx
    .select({ status: refundOrder.status, providerAttempt: refundOrder.providerAttempt })
    .from(refundOrder)
    .where(and(eq(refundOrder.userId, refund.userId), eq(refundOrder.id, refund.id)));
  const accepted = current?.providerAttempt ?? 0;
  const live = current?.status === "REFUND_PROCESSING" ? accepted : accepted + 1;
  if ((n.refund_attempt ?? 1) < live) {
    return ok("IGNORED", `attempt ${n.refund_attempt ?? 1} failed; attempt ${live} is the live one`);
  }
  const failed = await moveRefund(tx, refund, "failAfterAcceptance", {
    failureReason: "failed at the provider after it was accepted",
  });
  if (!failed)
    return ok("DUPLICATE", absorbedByUpdate(REFUND_MACHINE, REFUND_MACHINE.transitions.failAfterAcceptance));
  const { superseded } = await restateRejectedRefunds(
    tx,
    payment,
    "other refunds returned what it would have",
  );
  return superseded.includes(refund.providerRefundNo)
    ? ok("PROCESSED", "refund failed at the provider; other refunds took its place")
    : ok("PROCESSED", "refund failed at the provider; it awaits a person's Retry", true);
}
