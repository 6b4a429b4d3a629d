import { getEnv } from "~/env";
import { isAdminRequest } from "~/shared/admin-auth";
import { getLogger } from "~/shared/logger";
import { SIGNATURE_HEADER } from "~/shared/provider-contract";
import { adminActionInput, runAdminAction } from "./server/admin";
import { processCloseRequest } from "./server/closes";
import { getMockPayContext } from "./server/context";
import { failure, redirect, signedJson } from "./server/http";
import { answerStatusQuery } from "./server/query-api";
import { processRefundRequest } from "./server/refunds";
import { cancelTrade, confirmTrade } from "./server/trades";

/**
 * MockPay's HTTP surface: the route files under src/app/(mockpay)/provider/api mount
 * these. The merchant reaches MockPay only through them (docs/provider-contract.md).
 */
type Params<P> = { params: Promise<P> };

const log = () => getLogger().child({ party: "mockpay" });

/** The status query: the merchant's fallback when notifications are lost. Signed both ways. */
export async function tradeStatusRoute(req: Request, { params }: Params<{ outTradeNo: string }>) {
  const { outTradeNo } = await params;
  const mockPay = getMockPayContext();
  try {
    const answer = await answerStatusQuery(
      mockPay.db,
      {
        appId: new URL(req.url).searchParams.get("app_id") ?? "",
        outTradeNo,
        signature: req.headers.get(SIGNATURE_HEADER),
      },
      mockPay.webhookSecret,
    );
    return signedJson(answer);
  } catch (error) {
    return failure(error, log(), "status query");
  }
}

/** The refund API: signed request, signed answer. */
export async function refundsRoute(req: Request) {
  const mockPay = getMockPayContext();
  try {
    const answer = await processRefundRequest(
      mockPay.db,
      { body: await req.text(), signature: req.headers.get(SIGNATURE_HEADER) },
      mockPay.webhookSecret,
    );
    return signedJson(answer);
  } catch (error) {
    return failure(error, log(), "refund request");
  }
}

/** The close API: the merchant gives up on a trade (signed request, signed answer). */
export async function closesRoute(req: Request) {
  const mockPay = getMockPayContext();
  try {
    const answer = await processCloseRequest(
      mockPay.db,
      { body: await req.text(), signature: req.headers.get(SIGNATURE_HEADER) },
      mockPay.webhookSecret,
    );
    return signedJson(answer);
  } catch (error) {
    return failure(error, log(), "close request");
  }
}

/** The hosted pay page's buttons (plain HTML forms): pay or cancel, then back to the merchant. */
export async function tradeActionRoute(
  _req: Request,
  { params }: Params<{ outTradeNo: string; action: string }>,
) {
  const { outTradeNo, action } = await params;
  if (action !== "confirm" && action !== "cancel") return new Response("unknown action", { status: 404 });
  const mockPay = getMockPayContext();
  try {
    const trade =
      action === "confirm"
        ? await confirmTrade(mockPay.db, mockPay.appId, outTradeNo)
        : await cancelTrade(mockPay.db, mockPay.appId, outTradeNo);
    return redirect(trade.returnUrl.startsWith("/") ? trade.returnUrl : "/");
  } catch (error) {
    // A database that is away is a 503 the shopper may press the button again on.
    return failure(error, log(), "pay page action");
  }
}

/** The admin page's fault buttons (plain forms). Answers with a redirect back to the page. */
export async function adminTradeRoute(req: Request, { params }: Params<{ outTradeNo: string }>) {
  const { outTradeNo } = await params;
  if (!isAdminRequest(req.headers, getEnv().ADMIN_TOKEN)) {
    return new Response("admin token required", { status: 401 });
  }
  const parsed = adminActionInput.safeParse(Object.fromEntries(await req.formData()));
  const back = (message: string) =>
    redirect(`/provider/admin?message=${encodeURIComponent(message)}#trade-${outTradeNo}`);
  if (!parsed.success) return back(`invalid action: ${parsed.error.issues[0]?.message ?? "?"}`);
  const mockPay = getMockPayContext();
  try {
    const results = await runAdminAction(
      mockPay.db,
      mockPay.appId,
      outTradeNo,
      parsed.data,
      mockPay.delivery,
    );
    const acknowledged = results.filter((r) => r.ok).length;
    return back(
      results.length
        ? `${parsed.data.action}: ${results.length} sent, ${acknowledged} acknowledged by the merchant`
        : `${parsed.data.action}: done`,
    );
  } catch (error) {
    return back(
      error instanceof Error && error.name === "MockPayError" ? error.message : "the action failed",
    );
  }
}
