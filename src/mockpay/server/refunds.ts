import { and, eq, sql } from "drizzle-orm";
import { type RefundAnswer, refundRequestSchema } from "~/shared/provider-contract";
import type { MockPayDb } from "./db";
import { providerRefund, providerTrade } from "./schema";
import { readSignedRequest, type SignedAnswer, signedAnswer } from "./signed";
import { queueNotification } from "./trades";

/**
 * MockPay's refund API. Idempotent by (trade, refund_no): the same request
 * again is accepted again and refunds nothing more. Refunds of one trade never
 * exceed what was paid. An accepted refund succeeds at once and is announced
 * with a `refund.succeeded` notification, delivered like the others.
 */
export async function processRefundRequest(
  db: MockPayDb,
  raw: { body: string; signature: string | null },
  secret: string,
  nowS = Math.floor(Date.now() / 1000),
): Promise<SignedAnswer> {
  const read = readSignedRequest(raw, refundRequestSchema, secret, nowS);
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
    if (existing) {
      return existing.amountCents === request.amount_cents
        ? { refund_no: request.refund_no, status: "ACCEPTED" }
        : reject("refund_no already used with another amount");
    }
    if (trade.rejectRefunds > 0) {
      await tx
        .update(providerTrade)
        .set({ rejectRefunds: sql`${providerTrade.rejectRefunds} - 1` })
        .where(eq(providerTrade.id, trade.id));
      return reject("risk control (MockPay's reject-refunds fault)");
    }
    const [refunded] = await tx
      .select({ total: sql<number>`coalesce(sum(${providerRefund.amountCents}), 0)::bigint` })
      .from(providerRefund)
      .where(eq(providerRefund.tradeId, trade.id));
    if (Number(refunded?.total ?? 0) + request.amount_cents > trade.amountCents) {
      return reject("refunds would exceed the amount paid");
    }
    await tx.insert(providerRefund).values({
      tradeId: trade.id,
      refundNo: request.refund_no,
      amountCents: request.amount_cents,
    });
    await queueNotification(tx, trade, "refund.succeeded", {
      refundNo: request.refund_no,
      amountCents: request.amount_cents,
    });
    return { refund_no: request.refund_no, status: "ACCEPTED" };
  });
  return signedAnswer(answer, secret, nowS);
}
