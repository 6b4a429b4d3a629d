import { getAppContext } from "~/server/app-context";
import { handlePaymentNotification, rawNotification } from "~/server/payments/notification-receive";
import { getLogger } from "~/shared/logger";
import { type PlainResponse, plainRoute } from "~/shared/plain-http";

const MAX_BODY_BYTES = 64 * 1024;

const answer = (status: number, body: unknown): PlainResponse => ({
  status,
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

/** Providers post raw, signed bodies: verified on the exact bytes, so this is a route handler, not tRPC. */
export const POST = plainRoute(async (req) => {
  const body = await req.text();
  if (Buffer.byteLength(body) > MAX_BODY_BYTES)
    return answer(413, { code: "FAIL", message: "body too large" });
  const app = getAppContext();
  const raw = rawNotification(body, (name) => req.headers.get(name));
  const { deliveryId } = raw;
  try {
    const verdict = await handlePaymentNotification(app.db, raw, app.payments);
    return answer(verdict.httpStatus, verdict.body);
  } catch (err) {
    // The provider will send it again; nothing was committed.
    getLogger().error({ err, deliveryId }, "payment notification failed");
    return answer(500, { code: "FAIL", message: "internal error" });
  }
});
