import { sql } from "drizzle-orm";
import {
  type CloseAnswer,
  closeRequestSchema,
  signBody,
  verifyBodySignature,
} from "~/shared/provider-contract";
import type { MockPayDb } from "./db";
import type { SignedAnswer } from "./refunds";
import { providerTrade } from "./schema";
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
  const check = verifyBodySignature(secret, raw.body, raw.signature, nowS, 300);
  if (check !== "OK")
    return { status: 401, body: JSON.stringify({ message: `signature: ${check}` }), signature: null };
  let parsed: ReturnType<typeof closeRequestSchema.safeParse>;
  try {
    parsed = closeRequestSchema.safeParse(JSON.parse(raw.body));
  } catch {
    return { status: 400, body: JSON.stringify({ message: "body is not JSON" }), signature: null };
  }
  if (!parsed.success)
    return { status: 400, body: JSON.stringify({ message: "malformed close request" }), signature: null };
  const request = parsed.data;

  await db
    .insert(providerTrade)
    .values({
      appId: request.app_id,
      outTradeNo: request.out_trade_no,
      amountCents: request.amount_cents,
      currency: request.currency,
      notifyUrl: "",
      returnUrl: "/",
      status: "CLOSED",
      updatedAt: sql`now()`,
    })
    .onConflictDoNothing({ target: [providerTrade.appId, providerTrade.outTradeNo] });
  const trade = await cancelTrade(db, request.app_id, request.out_trade_no);
  if (trade.amountCents !== request.amount_cents || trade.currency !== request.currency) {
    return {
      status: 400,
      body: JSON.stringify({ message: "amount differs from the trade's" }),
      signature: null,
    };
  }
  const answer: CloseAnswer = {
    out_trade_no: trade.outTradeNo,
    status: trade.status === "PAID" ? "PAID" : "CLOSED",
    transaction_id: trade.transactionId,
  };
  const body = JSON.stringify(answer);
  return { status: 200, body, signature: signBody(secret, body, nowS) };
}
