import { and, eq } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { paymentOrder, type RefundStatus, refundOrder } from "~/server/db/schema";
import { type ProviderClientDeps, postToProvider } from "~/server/payments/provider-client";
import { REFUND_API, type RefundRequest, refundAnswerSchema } from "~/shared/provider-contract";
import { lockPayment, moveRefund, restateRejectedRefunds } from "./transitions";

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
  const answer = await postToProvider(deps, REFUND_API, request, refundAnswerSchema);
  const moved = await db.transaction(async (tx) => {
    const refund = { userId: row.refund.userId, id: row.refund.id };
    if (answer.status === "ACCEPTED") {
      const accepted = await moveRefund(tx, refund, "accept", {
        providerAttempt: answer.attempt ?? 1,
      });
      return accepted && { status: "REFUND_PROCESSING" as const };
    }
    // Under the payment's lock, as every refund decision: a rejection may be moot (below).
    const payment = { userId: row.refund.userId, id: row.refund.paymentId };
    await lockPayment(tx, payment);
    const rejected = await moveRefund(tx, refund, "reject", {
      failureReason: answer.reason ?? "rejected",
    });
    if (!rejected) return undefined;
    // Rejected because other refunds already returned what it would have (the provider never refunds
    // more than was paid): nobody should wait on it, so it is superseded at once rather than alerting.
    // And the room it leaves may fit a refund it superseded when it was recorded: that one awaits a person again.
    const { superseded } = await restateRejectedRefunds(
      tx,
      payment,
      "other refunds returned what it would have",
    );
    return {
      status: superseded.includes(providerRefundNo)
        ? ("REFUND_SUPERSEDED" as const)
        : ("REFUND_FAILED" as const),
    };
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
