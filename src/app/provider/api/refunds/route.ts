import { getAppContext } from "~/server/app-context";
import { SIGNATURE_HEADER } from "~/server/provider/contract";
import { processRefundRequest } from "~/server/provider/refunds";

export const dynamic = "force-dynamic";

/** MockPay's refund API: signed request, signed answer. */
export async function POST(req: Request) {
  const app = getAppContext();
  const answer = await processRefundRequest(
    app.db,
    { body: await req.text(), signature: req.headers.get(SIGNATURE_HEADER) },
    app.provider.webhookSecret,
  );
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (answer.signature) headers[SIGNATURE_HEADER] = answer.signature;
  return new Response(answer.body, { status: answer.status, headers });
}
