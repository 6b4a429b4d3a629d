import { eq, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { type RefundStatus, refundOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { type RefundDeps, submitRefund } from "./submit";
import { A_LINE_SHIPPED, lockPayment, moveRefund, restateRejectedRefunds } from "./transitions";

/**
 * An operator's Retry of a refund the provider rejected: the same refund number goes
 * to the provider again (it is idempotent by it), so retrying twice, or from two pages
 * at once, refunds once. Under the payment's lock, as every refund decision: one that
 * refunds made meanwhile left no room for is REFUND_SUPERSEDED instead (recordRefund
 * marks those as it records the new refund; this is the same rule, asked again). Lines whose
 * goods shipped while it was rejected are a return now (REFUND_AWAITING_GOODS): refunded once
 * the goods are back, as recordRefund makes lines of a shipped order.
 */
export async function retryFailedRefund(
  db: Db,
  providerRefundNo: string,
  deps: RefundDeps,
): Promise<RefundStatus> {
  const reopened = await db.transaction(async (tx) => {
    const [refund] = await tx
      .select()
      .from(refundOrder)
      .where(eq(refundOrder.providerRefundNo, providerRefundNo));
    if (!refund) throw new DomainError("ORDER_NOT_FOUND", `no refund ${providerRefundNo}`);
    // The refund's own payment: a late payment's refund is retried too, and its order may have none that succeeded.
    const payment = { userId: refund.userId, id: refund.paymentId };
    await lockPayment(tx, payment);
    // Then its order, as the shipping consumer takes it; whether its goods shipped is read by the next
    // statement, whose snapshot is taken once the lock is ours (a subquery beside the lock would read from
    // before a shipment that committed while it waited).
    await tx.execute(
      sql`SELECT id FROM orders WHERE user_id = ${refund.userId} AND id = ${refund.orderId} FOR UPDATE`,
    );
    const [order] = await tx.execute<{ shipped: boolean }>(sql`
      SELECT ${A_LINE_SHIPPED} AS shipped FROM refund_order r WHERE r.user_id = ${refund.userId} AND r.id = ${refund.id}`);
    const { superseded } = await restateRejectedRefunds(
      tx,
      payment,
      "other refunds returned what it would have",
    );
    if (superseded.includes(refund.providerRefundNo)) return undefined;
    const asReturn = order?.shipped ?? false;
    const moved = await moveRefund(tx, refund, asReturn ? "retryAsReturn" : "retry", { failureReason: null });
    // Sent again, it leaves less room: other rejected refunds it no longer leaves room for are superseded.
    if (moved) await restateRejectedRefunds(tx, payment, `refund ${refund.refundNo} was retried`);
    return moved && (asReturn ? ("return" as const) : ("send" as const));
  });
  if (reopened === "return") return "REFUND_AWAITING_GOODS";
  if (!reopened) {
    // Not failed (any more): someone retried it already, or other refunds took its place; say where it stands.
    const [current] = await db
      .select({ status: refundOrder.status })
      .from(refundOrder)
      .where(eq(refundOrder.providerRefundNo, providerRefundNo));
    return current?.status ?? "REFUND_CREATED";
  }
  // Left CREATED when the provider is away: the background submitter sends it later.
  return submitRefund(db, providerRefundNo, deps).catch(() => "REFUND_CREATED" as const);
}
