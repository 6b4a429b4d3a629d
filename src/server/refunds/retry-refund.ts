import { and, eq, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { type RefundStatus, refundOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { lockPaidPayment } from "./create-refund";
import { type RefundDeps, submitRefund } from "./submit";
import { supersedeFailedRefunds } from "./supersede";

/**
 * An operator's Retry of a refund the provider rejected: the same refund number goes
 * to the provider again (it is idempotent by it), so retrying twice, or from two pages
 * at once, refunds once. Under the payment's lock, as every refund decision: one that
 * refunds made meanwhile left no room for is REFUND_SUPERSEDED instead (recordRefund
 * marks those as it records the new refund; this is the same rule, asked again).
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
    const payment = await lockPaidPayment(tx, refund);
    if (!payment) throw new DomainError("ORDER_NOT_REFUNDABLE", "the order has no successful payment");
    const superseded = await supersedeFailedRefunds(
      tx,
      payment,
      "other refunds returned what it would have",
      refund.id,
    );
    if (superseded.length > 0) return false;
    const [moved] = await tx
      .update(refundOrder)
      .set({ status: "REFUND_CREATED", failureReason: null, updatedAt: sql`now()` })
      .where(
        and(
          eq(refundOrder.userId, refund.userId),
          eq(refundOrder.id, refund.id),
          eq(refundOrder.status, "REFUND_FAILED"),
        ),
      )
      .returning({ status: refundOrder.status });
    return moved !== undefined;
  });
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
