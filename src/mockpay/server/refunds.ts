import { and, eq, sql } from "drizzle-orm";
import { REFUND_API, type RefundAnswer, refundRequestSchema } from "~/shared/provider-contract";
import type { MockPayDb, MockPayExecutor } from "./db";
import { providerRefund, providerTrade } from "./schema";
import { readSignedRequest, type SignedAnswer, signedAnswer } from "./signed";
import { queueNotification } from "./trades";

/**
 * MockPay's refund API. Idempotent by (trade, refund_no): the same request
 * again is accepted again and refunds nothing more. Refunds of one trade never
 * exceed what was paid. An accepted refund is decided at once and announced
 * with a `refund.succeeded` notification, delivered like the others.
 *
 * Faults (the admin page's, per trade): the next refunds may be rejected outright
 * ("risk control"), accepted and then fail (`refund.failed`: the money stays; the
 * same refund_no sent again is a new attempt), or be decided silently, with no
 * notification at all (only the status query tells).
 */
export async function processRefundRequest(
  db: MockPayDb,
  raw: { body: string; signature: string | null },
  secret: string,
  nowS = Math.floor(Date.now() / 1000),
): Promise<SignedAnswer> {
  const read = readSignedRequest(REFUND_API.request, raw, refundRequestSchema, secret, nowS);
  if ("refused" in read) return read.refused;
  const { request } = read;

  const answer = await db.transaction(async (tx): Promise<RefundAnswer> => {
    const reject = (reason: string): RefundAnswer => ({
      refund_no: request.refund_no,
      status: "REJECTED",
      reason,
    });
    const [trade] = await tx
      .select()
      .from(providerTrade)
      .where(and(eq(providerTrade.appId, request.app_id), eq(providerTrade.outTradeNo, request.out_trade_no)))
      // Refunds of one trade take turns: the sum check below cannot be raced.
      .for("update");
    if (!trade) return reject("unknown trade");
    if (trade.status !== "PAID") return reject(`trade is ${trade.status}`);
    if (request.currency !== trade.currency) return reject("currency differs from the trade's");
    const [existing] = await tx
      .select()
      .from(providerRefund)
      .where(and(eq(providerRefund.tradeId, trade.id), eq(providerRefund.refundNo, request.refund_no)));
    if (existing && existing.amountCents !== request.amount_cents) {
      return reject("refund_no already used with another amount");
    }
    // Decided already, and not failed: the same answer again.
    if (existing && existing.status !== "FAILED") {
      return { refund_no: request.refund_no, status: "ACCEPTED", attempt: existing.attempts };
    }
    if (trade.rejectRefunds > 0) {
      await spendFault(tx, trade.id, "rejectRefunds");
      return reject("risk control (MockPay's reject-refunds fault)");
    }
    const [refunded] = await tx
      .select({ total: sql<number>`coalesce(sum(${providerRefund.amountCents}), 0)::bigint` })
      .from(providerRefund)
      .where(and(eq(providerRefund.tradeId, trade.id), sql`${providerRefund.status} <> 'FAILED'`));
    if (Number(refunded?.total ?? 0) + request.amount_cents > trade.amountCents) {
      return reject("refunds would exceed the amount paid");
    }
    const fails = trade.failRefunds > 0;
    const silent = trade.silentRefunds > 0;
    if (fails) await spendFault(tx, trade.id, "failRefunds");
    if (silent) await spendFault(tx, trade.id, "silentRefunds");
    const status = fails ? ("FAILED" as const) : ("SUCCEEDED" as const);
    // A new refund, or a new attempt at one that failed.
    const [decided] = existing
      ? await tx
          .update(providerRefund)
          .set({ status, attempts: sql`${providerRefund.attempts} + 1`, updatedAt: sql`now()` })
          .where(eq(providerRefund.id, existing.id))
          .returning({ attempts: providerRefund.attempts })
      : await tx
          .insert(providerRefund)
          .values({
            tradeId: trade.id,
            refundNo: request.refund_no,
            amountCents: request.amount_cents,
            status,
          })
          .returning({ attempts: providerRefund.attempts });
    const attempt = decided?.attempts ?? 1;
    if (!silent) {
      await queueNotification(tx, trade, fails ? "refund.failed" : "refund.succeeded", {
        refundNo: request.refund_no,
        amountCents: request.amount_cents,
        attempt,
      });
    }
    return { refund_no: request.refund_no, status: "ACCEPTED", attempt };
  });
  return signedAnswer(REFUND_API.answer, answer, secret, nowS);
}

type RefundFault = "rejectRefunds" | "failRefunds" | "silentRefunds";

/** One use of a trade's refund fault counter. */
async function spendFault(tx: MockPayExecutor, tradeId: string, fault: RefundFault) {
  await tx
    .update(providerTrade)
    .set({ [fault]: sql`${providerTrade[fault]} - 1` })
    .where(eq(providerTrade.id, tradeId));
}
