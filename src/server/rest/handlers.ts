import { newShopper } from "~/server/admission/admission";
import { orderIdParams } from "~/server/db/order-ref";
import { DomainError } from "~/server/errors";
import { getOrderById } from "~/server/orders/queries";
import { paymentsOfOrder } from "~/server/payments/queries";
import { refundsOfOrder } from "~/server/refunds/queries";
import { revokeCredentials } from "~/server/session/api-tokens";
import { signApiToken } from "~/server/session/session";
import { clientAddressOf } from "~/shared/client-address";
import type { PlainRequest, PlainResponse } from "~/shared/plain-http";
import { authenticate, json, problem, type RestDeps, respond } from "./protocol";

/**
 * The REST API's reads and its token endpoint. Its idempotent writes are defined
 * operations mounted by `restRoute` (./operation.ts).
 */
function orderIdFrom(raw: string): string {
  const parsed = orderIdParams.safeParse({ orderId: raw });
  if (!parsed.success) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  return parsed.data.orderId;
}

export function getOrder(deps: RestDeps, req: PlainRequest, rawOrderId: string): Promise<PlainResponse> {
  return respond(deps, req, async (requestId) => {
    const { userId } = await authenticate(req, deps.app, requestId);
    const orderId = orderIdFrom(rawOrderId);
    const order = await getOrderById(deps.app.db, userId, orderId);
    // getOrderById checked ownership; the rest is read once, without re-checking.
    const [payments, refunds] = await Promise.all([
      paymentsOfOrder(deps.app.db, { userId, orderId }),
      refundsOfOrder(deps.app.db, { userId, orderId }),
    ]);
    return json(200, {
      ...order,
      createdAt: order.createdAt.toISOString(),
      payments: payments.map((p) => ({
        outTradeNo: p.outTradeNo,
        status: p.status,
        amountCents: p.amountCents,
      })),
      refunds: refunds.map((r) => ({
        refundNo: r.refundNo,
        status: r.status,
        amountCents: r.amountCents,
        currency: r.currency,
        ...(r.lines.length > 0 ? { lines: r.lines } : {}),
      })),
    });
  });
}

/** A new guest shopper and its bearer token (development convenience; API_TOKENS_ENABLED=false turns it off). */
export function postToken(deps: RestDeps, req: PlainRequest): Promise<PlainResponse> {
  return respond(deps, req, async () => {
    if (!deps.tokensEnabled)
      return problem(403, "TOKENS_DISABLED", "Making tokens through the API is turned off.");
    const shopper = await newShopper({ app: deps.app, clientAddress: clientAddressOf(req.headers) });
    return json(201, { token: signApiToken(shopper, deps.app.sessionSecret) });
  });
}

/**
 * Signs the bearer's shopper out everywhere: every API token and session cookie issued so far is refused from
 * now on, this one included (the shopper makes a new one with POST /api/v1/tokens, or signs in again).
 */
export function deleteTokens(deps: RestDeps, req: PlainRequest): Promise<PlainResponse> {
  return respond(deps, req, async (requestId) => {
    const { userId } = await authenticate(req, deps.app, requestId);
    const revokedAt = await revokeCredentials(deps.app.db, userId);
    return json(200, { revokedAt: revokedAt.toISOString() });
  });
}
