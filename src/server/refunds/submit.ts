import { and, eq, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { paymentOrder, type RefundStatus, refundOrder } from "~/server/db/schema";
import { type ProviderClientDeps, postToProvider } from "~/server/payments/provider-client";
import { type RefundRequest, refundAnswerSchema } from "~/shared/provider-contract";
import { supersedeFailedRefunds } from "./supersede";

export type RefundDeps = ProviderClientDeps;

/**
 * Sends a REFUND_CREATED refund to the provider. The provider is idempotent by
 * refund_no, and the transitions here are conditional, so sending twice (two
 * workers, a retry after a lost answer) is harmless. A network failure leaves
 * the refund CREATED for the next round.
 */
export async function submitRefund(
  db: Db,
  providerRefundNo: string,
  deps: RefundDeps,
): Promise<RefundStatus> {
  const [row] = await db
    .select({ refund: refundOrder, outTradeNo: paymentOrder.outTradeNo })
    .from(refundOrder)
    .innerJoin(
      paymentOrder,
      and(eq(paymentOrder.userId, refundOrder.userId), eq(paymentOrder.id, refundOrder.paymentId)),
    )
    .where(eq(refundOrder.providerRefundNo, providerRefundNo));
  if (!row) throw new Error(`no refund ${providerRefundNo}`);
  if (row.refund.status !== "REFUND_CREATED") return row.refund.status;

  const request: RefundRequest = {
    app_id: deps.appId,
    out_trade_no: row.outTradeNo,
    refund_no: providerRefundNo,
    amount_cents: row.refund.amountCents,
    currency: row.refund.currency,
  };
  const answer = await postToProvider(deps, "/provider/api/refunds", request, refundAnswerSchema);
  const moved = await db.transaction(async (tx) => {
    if (answer.status !== "ACCEPTED") {
      // Under the payment's lock, as every refund decision: a rejection may be moot (below).
      await tx
        .select({ id: paymentOrder.id })
        .from(paymentOrder)
        .where(and(eq(paymentOrder.userId, row.refund.userId), eq(paymentOrder.id, row.refund.paymentId)))
        .for("update");
    }
    const [updated] = await tx
      .update(refundOrder)
      .set(
        answer.status === "ACCEPTED"
          ? { status: "REFUND_PROCESSING", updatedAt: sql`now()` }
          : { status: "REFUND_FAILED", failureReason: answer.reason ?? "rejected", updatedAt: sql`now()` },
      )
      .where(
        and(eq(refundOrder.providerRefundNo, providerRefundNo), eq(refundOrder.status, "REFUND_CREATED")),
      )
      .returning({ status: refundOrder.status });
    if (updated?.status !== "REFUND_FAILED") return updated;
    // Rejected because other refunds already returned what it would have (the provider never refunds
    // more than was paid): nobody should wait on it, so it is superseded at once rather than alerting.
    const superseded = await supersedeFailedRefunds(
      tx,
      { userId: row.refund.userId, id: row.refund.paymentId },
      "other refunds returned what it would have",
      row.refund.id,
    );
    return superseded.length > 0 ? { status: "REFUND_SUPERSEDED" as const } : updated;
  });
  if (moved) return moved.status;
  const [current] = await db
    .select({ status: refundOrder.status })
    .from(refundOrder)
    .where(eq(refundOrder.providerRefundNo, providerRefundNo));
  return current?.status ?? "REFUND_CREATED";
}

/** The background submitter: every refund still REFUND_CREATED (e.g. automatic refunds, lost answers). */
export async function submitPendingRefunds(db: Db, deps: RefundDeps, limit = 20): Promise<number> {
  const pending = await db
    .select({ providerRefundNo: refundOrder.providerRefundNo })
    .from(refundOrder)
    .where(eq(refundOrder.status, "REFUND_CREATED"))
    .orderBy(refundOrder.createdAt)
    .limit(limit);
  let submitted = 0;
  for (const { providerRefundNo } of pending) {
    try {
      await submitRefund(db, providerRefundNo, deps);
      submitted++;
    } catch {
      // Left CREATED: the next round tries again.
    }
  }
  return submitted;
}
