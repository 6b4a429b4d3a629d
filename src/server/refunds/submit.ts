import { randomUUID } from "node:crypto";
import { and, eq, isNull, lt, or, sql } from "drizzle-orm";
import type { Db, Executor } from "~/server/db/client";
import { type RefundStatus, refundOrder } from "~/server/db/schema";
import { type ProviderClientDeps, postToProvider } from "~/server/payments/provider-client";
import {
  REFUND_API,
  type RefundAnswer,
  type RefundRequest,
  refundAnswerSchema,
} from "~/shared/provider-contract";
import { lockPayment, moveRefund, restateRejectedRefunds } from "./transitions";

export type RefundDeps = ProviderClientDeps;

/**
 * How long a send holds its refund (the claim below): six times the provider client's timeout (30 s for its
 * 5 s), so a send given up on has long been answered, or dropped, before another send of the refund may go.
 */
export const sendLeaseS = (deps: RefundDeps) => Math.ceil((6 * (deps.timeoutMs ?? 5_000)) / 1000);

/**
 * Sends a REFUND_CREATED refund to the provider, one send at a time. The provider may reject one send and
 * accept another (MockPay's reject fault is spent by the first it hears): a rejection recorded while another
 * send was under way could be a refund the provider pays anyway, for goods that shipped meanwhile because it
 * was rejected here. So:
 * - a send claims the refund first (a conditional update); one that finds it claimed leaves it to that send;
 * - its answer is recorded under the payment's lock, and only while it still holds the claim (a Retry or a
 *   return received frees it: the refund's next attempt is another send's);
 * - the claim is freed with the answer, when recording it failed (the provider answered), or when the request
 *   never left (refused, unknown host). Any other failure (a timeout, a reset, an error status) may still reach
 *   the provider: the claim lapses after `sendLeaseS`, and the background submitter sends again.
 * The provider is idempotent by refund_no, so a send after a lost answer gets the first answer again.
 */
export async function submitRefund(
  db: Db,
  providerRefundNo: string,
  deps: RefundDeps,
): Promise<RefundStatus> {
  const claim = randomUUID();
  const [claimed] = await db.execute<{
    id: string;
    user_id: string;
    payment_id: string;
    amount_cents: string;
    currency: string;
    out_trade_no: string;
  }>(sql`
    UPDATE refund_order r
       SET send_claim = ${claim}, send_until = clock_timestamp() + ${sendLeaseS(deps)} * interval '1 second'
      FROM payment_order p
     WHERE r.provider_refund_no = ${providerRefundNo} AND r.status = 'REFUND_CREATED'
       AND (r.send_until IS NULL OR r.send_until < clock_timestamp())
       AND p.user_id = r.user_id AND p.id = r.payment_id
    RETURNING r.id, r.user_id, r.payment_id, r.amount_cents, r.currency, p.out_trade_no`);
  if (!claimed) return statusOf(db, providerRefundNo);
  const refund = { userId: claimed.user_id, id: claimed.id };
  const freeClaim = (executor: Executor) =>
    executor.execute(sql`
      UPDATE refund_order SET send_claim = NULL, send_until = NULL
       WHERE user_id = ${refund.userId} AND id = ${refund.id} AND send_claim = ${claim}`);

  const request: RefundRequest = {
    app_id: deps.appId,
    out_trade_no: claimed.out_trade_no,
    refund_no: providerRefundNo,
    amount_cents: Number(claimed.amount_cents),
    currency: claimed.currency,
  };
  let answer: RefundAnswer;
  try {
    answer = await postToProvider(deps, REFUND_API, request, refundAnswerSchema);
  } catch (error) {
    if (neverSent(error)) await freeClaim(db);
    throw error;
  }
  const moved = await db
    .transaction(async (tx) => {
      // Under the payment's lock, as every refund decision (its ledger rows reference the payment: taking the
      // refund's row first, then waiting on the payment a Retry holds while it waits on this refund, deadlocks).
      const payment = { userId: refund.userId, id: claimed.payment_id };
      await lockPayment(tx, payment);
      if (answer.status === "ACCEPTED") {
        const accepted = await moveRefund(tx, refund, "accept", {
          providerAttempt: answer.attempt ?? 1,
          sendClaim: claim,
        });
        await freeClaim(tx);
        return accepted && { status: "REFUND_PROCESSING" as const };
      }
      const rejected = await moveRefund(tx, refund, "reject", {
        failureReason: answer.reason ?? "rejected",
        sendClaim: claim,
      });
      await freeClaim(tx);
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
    })
    .catch(async (error: unknown) => {
      await freeClaim(db).catch(() => {});
      throw error;
    });
  return moved ? moved.status : statusOf(db, providerRefundNo);
}

async function statusOf(db: Db, providerRefundNo: string): Promise<RefundStatus> {
  const [current] = await db
    .select({ status: refundOrder.status })
    .from(refundOrder)
    .where(eq(refundOrder.providerRefundNo, providerRefundNo));
  if (!current) throw new Error(`no refund ${providerRefundNo}`);
  return current.status;
}

/**
 * Failures that prove the request never reached the provider: no connection was made, or fetch refused the
 * port before connecting ("bad port", the Fetch standard's blocked ports).
 */
const NOT_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

function neverSent(error: unknown): boolean {
  for (let cause = error; cause instanceof Object; cause = (cause as { cause?: unknown }).cause) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if ((typeof code === "string" && NOT_CONNECTED.has(code)) || message === "bad port") return true;
  }
  return false;
}

/** The background submitter: every refund still REFUND_CREATED (e.g. automatic refunds, lost answers). */
export async function submitPendingRefunds(db: Db, deps: RefundDeps, limit = 20): Promise<number> {
  const pending = await db
    .select({ providerRefundNo: refundOrder.providerRefundNo })
    .from(refundOrder)
    // A refund a send holds is that send's.
    .where(
      and(
        eq(refundOrder.status, "REFUND_CREATED"),
        or(isNull(refundOrder.sendUntil), lt(refundOrder.sendUntil, sql`clock_timestamp()`)),
      ),
    )
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
