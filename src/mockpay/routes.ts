import { z } from "zod";
import { isAdminRequest } from "~/shared/admin-auth";
import { getLogger } from "~/shared/logger";
import { payRequestSchema, SIGNATURE_HEADER, verifyPayRequest } from "~/shared/provider-contract";
import { adminActionInput, runAdminAction } from "./server/admin";
import { failure, redirect, signedJson } from "./server/answers";
import { processCloseRequest } from "./server/closes";
import { getMockPayContext } from "./server/context";
import { endpointActionInput, runEndpointAction } from "./server/endpoints";
import { answerStatusQuery } from "./server/query-api";
import { processRefundRequest } from "./server/refunds";
import { sameSiteReturnPath } from "./server/return-url";
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

/**
 * One of the merchant's signed calls (a refund, a close): the request verified and processed by `process`,
 * the answer signed; a failure answered as `what` failed.
 */
function signedApi(
  process: typeof processRefundRequest | typeof processCloseRequest,
  what: string,
): (req: Request) => Promise<Response> {
  return async (req) => {
    const mockPay = getMockPayContext();
    try {
      const answer = await process(
        mockPay.db,
        { body: await req.text(), signature: req.headers.get(SIGNATURE_HEADER) },
        mockPay.webhookSecret,
      );
      return signedJson(answer);
    } catch (error) {
      return failure(error, log(), what);
    }
  };
}

/** The refund API: signed request, signed answer. */
export const refundsRoute = signedApi(processRefundRequest, "refund request");

/** The close API: the merchant gives up on a trade (signed request, signed answer). */
export const closesRoute = signedApi(processCloseRequest, "close request");

/**
 * The hosted pay page's buttons (plain HTML forms): pay or cancel, then back to the merchant. A
 * Confirm that took no money (the link expired, or the merchant closed the trade) goes back to
 * the pay page instead, which says why.
 *
 * An action needs the signed pay link it was shown under (the form carries its fields): knowing a
 * trade number is not enough to pay or cancel it, and a form posted from another site cannot
 * forge the link's signature. A link past its `expires_at` acts on nothing. A post that says it
 * comes from another origin is refused outright.
 */
export async function tradeActionRoute(
  req: Request,
  { params }: Params<{ outTradeNo: string; action: string }>,
) {
  const { outTradeNo, action } = await params;
  if (action !== "confirm" && action !== "cancel") return new Response("unknown action", { status: 404 });
  if (fromAnotherOrigin(req)) return refusal(403, "FORBIDDEN", "this form was posted from another site");
  const form = await req.formData().catch(() => undefined);
  const link = payRequestSchema.safeParse(Object.fromEntries(form ?? []));
  const mockPay = getMockPayContext();
  if (!link.success || link.data.out_trade_no !== outTradeNo || link.data.app_id !== mockPay.appId) {
    return refusal(
      400,
      "INVALID_REQUEST",
      "the action must carry the signed payment link it was shown under",
    );
  }
  const { sig, ...request } = link.data;
  if (!verifyPayRequest(mockPay.webhookSecret, request, sig)) {
    return refusal(403, "INVALID_REQUEST", "the payment link's signature does not match");
  }
  const back = payPageToReturnTo(form, outTradeNo);
  try {
    if (request.expires_at * 1000 <= Date.now()) {
      // The pay page says the link has expired (and closes the trade if it still waited).
      return back ? redirect(back) : refusal(410, "LINK_EXPIRED", "this payment link has expired");
    }
    const trade =
      action === "confirm"
        ? await confirmTrade(mockPay.db, mockPay.appId, outTradeNo)
        : await cancelTrade(mockPay.db, mockPay.appId, outTradeNo);
    if (action === "confirm" && trade.status !== "PAID" && back) return redirect(back);
    return redirect(sameSiteReturnPath(trade.returnUrl));
  } catch (error) {
    // A database that is away is a 503 the shopper may press the button again on.
    return failure(error, log(), "pay page action");
  }
}

function refusal(status: number, code: string, message: string): Response {
  return Response.json({ code, message }, { status, headers: { "cache-control": "no-store" } });
}

/** A browser's form post names its origin; one from another site is a forgery (the check CSRF needs). */
function fromAnotherOrigin(req: Request): boolean {
  const origin = req.headers.get("origin");
  if (origin === null || origin === "null") return origin === "null";
  try {
    return new URL(origin).host !== (req.headers.get("host") ?? new URL(req.url).host);
  } catch {
    return true;
  }
}

/** The form's own pay page (its `back` field), if it is this trade's: never a redirect elsewhere. */
function payPageToReturnTo(form: FormData | undefined, outTradeNo: string): string | undefined {
  const back = form?.get("back");
  const prefix = `/provider/pay/${encodeURIComponent(outTradeNo)}?`;
  return typeof back === "string" && back.startsWith(prefix) && !/[\r\n\\]/.test(back) ? back : undefined;
}

/** The admin page's fault buttons (plain forms). Answers with a redirect back to the page. */
export async function adminTradeRoute(req: Request, { params }: Params<{ outTradeNo: string }>) {
  const { outTradeNo } = await params;
  if (!isAdminRequest(req.headers, getMockPayContext().adminToken)) {
    return new Response("admin token required", { status: 401 });
  }
  const form = await req.formData().catch(() => undefined);
  if (!form) {
    return Response.json(
      { code: "BAD_FORM", message: "send the action as a form (application/x-www-form-urlencoded)" },
      { status: 400 },
    );
  }
  const parsed = adminActionInput.safeParse(Object.fromEntries(form));
  const back = (message: string) =>
    redirect(
      `/provider/admin?message=${encodeURIComponent(message)}#trade-${encodeURIComponent(outTradeNo)}`,
    );
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

/** The console's endpoint forms (format, key rotation, enable after a 410). Answers with a redirect back. */
export async function adminEndpointRoute(req: Request, { params }: Params<{ endpointId: string }>) {
  const { endpointId } = await params;
  if (!isAdminRequest(req.headers, getMockPayContext().adminToken)) {
    return new Response("admin token required", { status: 401 });
  }
  if (!z.uuid().safeParse(endpointId).success) return refusal(404, "NOT_FOUND", `no endpoint ${endpointId}`);
  const form = await req.formData().catch(() => undefined);
  const parsed = endpointActionInput.safeParse(Object.fromEntries(form ?? []));
  const back = (message: string) =>
    redirect(
      `/provider/admin?message=${encodeURIComponent(message)}#endpoint-${encodeURIComponent(endpointId)}`,
    );
  if (!parsed.success) return back(`invalid action: ${parsed.error.issues[0]?.message ?? "?"}`);
  try {
    return back(await runEndpointAction(getMockPayContext().db, endpointId, parsed.data));
  } catch (error) {
    if (error instanceof Error && error.name === "MockPayError") return back(error.message);
    return failure(error, log(), "endpoint action");
  }
}
