import { getAppContext } from "~/server/app-context";
import { SIGNATURE_HEADER } from "~/server/provider/contract";
import { answerStatusQuery } from "~/server/provider/query-api";

export const dynamic = "force-dynamic";

/** MockPay's status query: the merchant's fallback when notifications are lost. Signed both ways. */
export async function GET(req: Request, { params }: { params: Promise<{ outTradeNo: string }> }) {
  const { outTradeNo } = await params;
  const app = getAppContext();
  const answer = await answerStatusQuery(
    app.db,
    {
      appId: new URL(req.url).searchParams.get("app_id") ?? "",
      outTradeNo,
      signature: req.headers.get(SIGNATURE_HEADER),
    },
    app.provider.webhookSecret,
  );
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (answer.signature) headers[SIGNATURE_HEADER] = answer.signature;
  return new Response(answer.body, { status: answer.status, headers });
}
