import { tradeQueryPath, verifyQuery } from "~/shared/provider-contract";
import type { MockPayDb } from "./db";
import { refused, type SignedAnswer, signedAnswer } from "./signed";
import { tradeStatus } from "./trades";

/** MockPay's status query, as its HTTP route serves it: the request must be signed, and so is the answer. */
export async function answerStatusQuery(
  db: MockPayDb,
  request: { appId: string; outTradeNo: string; signature: string | null },
  secret: string,
  nowS = Math.floor(Date.now() / 1000),
): Promise<SignedAnswer> {
  const check = verifyQuery(
    secret,
    tradeQueryPath(request.appId, request.outTradeNo),
    request.signature,
    nowS,
    300,
  );
  if (check !== "OK") return refused(401, `signature: ${check}`);
  return signedAnswer("statusAnswer", await tradeStatus(db, request.appId, request.outTradeNo), secret, nowS);
}
