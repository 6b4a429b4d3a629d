import { and, eq, ne, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { type RefundStatus, refundOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { lockPaidPayment } from "./create-refund";
import { type RefundDeps, submitRefund } from "./submit";

/**
 * An operator's Retry of a refund the provider rejected: the same refund number goes
 * to the provider again (it is idempotent by it), so retrying twice, or from two pages
 * at once, refunds once. Under the payment's lock, as every refund decision: a refund
 * made meanwhile for what was left makes this one too large (REFUND_EXCEEDS_PAID).
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
    const payment = await lockPaidPayment(tx, refund.orderId);
    if (!payment) throw new DomainError("ORDER_NOT_REFUNDABLE", "the order has no successful payment");
    const [others] = await tx
      .select({ total: sql<string>`coalesce(sum(${refundOrder.amountCents}), 0)` })
      .from(refundOrder)
      .where(
        and(
          eq(refundOrder.paymentId, payment.id),
          ne(refundOrder.status, "REFUND_FAILED"),
          ne(refundOrder.id, refund.id),
        ),
      );
    if (Number(others?.total ?? 0) + refund.amountCents > payment.amountCents) {
      throw new DomainError("REFUND_EXCEEDS_PAID", "other refunds took what this one would return", {
        meta: { paidCents: payment.amountCents, refundedCents: Number(others?.total ?? 0) },
      });
    }
    const [moved] = await tx
      .update(refundOrder)
      .set({ status: "REFUND_CREATED", failureReason: null, updatedAt: sql`now()` })
      .where(and(eq(refundOrder.id, refund.id), eq(refundOrder.status, "REFUND_FAILED")))
      .returning({ status: refundOrder.status });
    return moved !== undefined;
  });
  if (!reopened) {
    // Not failed (any more): someone retried it already; say where it stands.
    const [current] = await db
      .select({ status: refundOrder.status })
      .from(refundOrder)
      .where(eq(refundOrder.providerRefundNo, providerRefundNo));
    return current?.status ?? "REFUND_CREATED";
  }
  // Left CREATED when the provider is away: the background submitter sends it later.
  return submitRefund(db, providerRefundNo, deps).catch(() => "REFUND_CREATED" as const);
}
