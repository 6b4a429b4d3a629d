import { sql } from "drizzle-orm";
import { CLOSE_API, type CloseAnswer, closeRequestSchema } from "~/shared/provider-contract";
import type { MockPayDb } from "./db";
import { TRADE_MACHINE } from "./machine";
import { providerTrade } from "./schema";
import { readSignedRequest, refused, type SignedAnswer, signedAnswer } from "./signed";
import { cancelTrade } from "./trades";

/**
 * MockPay's close API: the merchant gives up on a trade (its order was cancelled or
 * timed out). Idempotent by out_trade_no, and decided by the same conditional
 * update as the pay page's buttons, so a shopper's Confirm and the merchant's close
 * race for one row: exactly one wins. A trade nobody opened yet is recorded as
 * closed, so its pay link can no longer be paid.
 */
export async function processCloseRequest(
  db: MockPayDb,
  raw: { body: string; signature: string | null },
  secret: string,
  nowS = Math.floor(Date.now() / 1000),
): Promise<SignedAnswer> {
  const read = readSignedRequest(CLOSE_API.request, raw, closeRequestSchema, secret, nowS);
  if ("refused" in read) return read.refused;
  const { request } = read;

  await db
    .insert(providerTrade)
    .values({
      appId: request.app_id,
      outTradeNo: request.out_trade_no,
      amountCents: request.amount_cents,
      currency: request.currency,
      notifyUrl: "",
      returnUrl: "/",
      status: TRADE_MACHINE.transitions.closeUnopened.to,
      updatedAt: sql`now()`,
    })
    .onConflictDoNothing({ target: [providerTrade.appId, providerTrade.outTradeNo] });
  const trade = await cancelTrade(db, request.app_id, request.out_trade_no);
  if (trade.amountCents !== request.amount_cents || trade.currency !== request.currency) {
    return refused(400, "amount differs from the trade's");
  }
  const answer: CloseAnswer = {
    out_trade_no: trade.outTradeNo,
    status: trade.status === "PAID" ? "PAID" : "CLOSED",
    transaction_id: trade.transactionId,
  };
  return signedAnswer(CLOSE_API.answer, answer, secret, nowS);
}
