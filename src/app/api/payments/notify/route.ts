import { getAppContext } from "~/server/app-context";
import { withRequestContext } from "~/server/observability/request-context";
import { handlePaymentNotification } from "~/server/payments/notify";
import { getLogger } from "~/shared/logger";
import { DELIVERY_ID_HEADER, SIGNATURE_HEADER } from "~/shared/provider-contract";

const MAX_BODY_BYTES = 64 * 1024;

/** Providers post raw, signed bodies: verified on the exact bytes, so this is a route handler, not tRPC. */
export async function POST(req: Request) {
  const body = await req.text();
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) {
    return Response.json({ code: "FAIL", message: "body too large" }, { status: 413 });
  }
  const app = getAppContext();
  try {
    const deliveryId = req.headers.get(DELIVERY_ID_HEADER) ?? undefined;
    const answer = await withRequestContext({ requestId: deliveryId ?? "notification" }, () =>
      handlePaymentNotification(
        app.db,
        {
          body,
          signature: req.headers.get(SIGNATURE_HEADER),
          deliveryId: req.headers.get(DELIVERY_ID_HEADER),
        },
        app.payments,
      ),
    );
    return Response.json(answer.body, { status: answer.httpStatus });
  } catch (err) {
    // The provider will send it again; nothing was committed.
    getLogger().error(
      { err, deliveryId: req.headers.get(DELIVERY_ID_HEADER) },
      "payment notification failed",
    );
    return Response.json({ code: "FAIL", message: "internal error" }, { status: 500 });
  }
}
