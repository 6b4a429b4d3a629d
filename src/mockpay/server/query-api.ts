import { signBody, tradeQueryPath, verifyQuery } from "~/shared/provider-contract";
import type { MockPayDb } from "./db";
import { tradeStatus } from "./trades";

export interface QueryAnswer {
  status: number;
  body: string;
  /** The answer's own signature (over the body), for the Provider-Signature header. */
  signature: string | null;
}

/** MockPay's status query, as its HTTP route serves it: the request must be signed, and so is the answer. */
export async function answerStatusQuery(
  db: MockPayDb,
  request: { appId: string; outTradeNo: string; signature: string | null },
  secret: string,
  nowS = Math.floor(Date.now() / 1000),
): Promise<QueryAnswer> {
  const check = verifyQuery(
    secret,
    tradeQueryPath(request.appId, request.outTradeNo),
    request.signature,
    nowS,
    300,
  );
  if (check !== "OK") {
    return {
      status: 401,
      body: JSON.stringify({ code: "FAIL", message: `signature: ${check}` }),
      signature: null,
    };
  }
  const body = JSON.stringify(await tradeStatus(db, request.appId, request.outTradeNo));
  return { status: 200, body, signature: signBody(secret, body, nowS) };
}
