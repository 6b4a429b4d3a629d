import { getAppContext } from "~/server/app-context";
import { isDomainError } from "~/server/errors";
import { getLogger } from "~/server/logger";
import { cancelTrade, confirmTrade } from "~/server/provider/trades";
import { errorResponse } from "~/server/rest/http";

export const dynamic = "force-dynamic";

/** The hosted pay page's buttons (plain HTML forms): pay or cancel, then back to the merchant. */
export async function POST(
  _req: Request,
  { params }: { params: Promise<{ outTradeNo: string; action: string }> },
) {
  const { outTradeNo, action } = await params;
  const app = getAppContext();
  if (action !== "confirm" && action !== "cancel") return new Response("unknown action", { status: 404 });
  try {
    const trade =
      action === "confirm"
        ? await confirmTrade(app.db, app.provider.appId, outTradeNo)
        : await cancelTrade(app.db, app.provider.appId, outTradeNo);
    const back = trade.returnUrl.startsWith("/") ? trade.returnUrl : "/";
    return new Response(null, { status: 303, headers: { location: back } });
  } catch (error) {
    if (isDomainError(error)) return new Response("no such trade", { status: 404 });
    // The database is away: a retryable 503 the shopper may press the button again on; anything else a 500.
    return errorResponse(error, (err) => getLogger().error({ err }, "MockPay pay page action failed"));
  }
}
