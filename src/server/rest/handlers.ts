import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import { DomainError } from "~/server/errors";
import { withRequestContext } from "~/server/observability/request-context";
import { createOrder } from "~/server/orders/create-order";
import { getOrderById } from "~/server/orders/queries";
import { orderIdInput } from "~/server/orders/schema";
import { createPaymentWithKey } from "~/server/payments/create-payment";
import { paymentsOfOrder } from "~/server/payments/queries";
import { createRefundWithKey } from "~/server/refunds/create-refund";
import { refundsOfOrder } from "~/server/refunds/queries";
import { newGuestId, signApiToken } from "~/server/session/session";
import {
  authenticate,
  created,
  errorResponse,
  HttpProblem,
  idempotencyKey,
  invalid,
  json,
  jsonBody,
  problem,
} from "./http";
import { createOrderBody, createRefundBody, orderResource, paymentResource, refundResource } from "./schemas";

/**
 * The REST API (`/api/v1`): an adapter over the same services and idempotency
 * core as tRPC. Each handler takes a standard Request and answers a Response.
 */
export interface RestDeps {
  app: AppContext;
  tokensEnabled: boolean;
  logError: (error: unknown) => void;
}

async function respond(deps: RestDeps, work: () => Promise<Response>): Promise<Response> {
  const requestId = randomUUID();
  return withRequestContext({ requestId }, async () => {
    try {
      const response = await work();
      response.headers.set("x-request-id", requestId);
      return response;
    } catch (error) {
      if (error instanceof HttpProblem) return error.response;
      return errorResponse(error, (err) => deps.logError({ err, requestId }));
    }
  });
}

function orderIdFrom(raw: string): string {
  const parsed = orderIdInput.safeParse({ orderId: raw });
  if (!parsed.success) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  return parsed.data.orderId;
}

export function postOrder(deps: RestDeps, req: Request): Promise<Response> {
  return respond(deps, async () => {
    const userId = authenticate(req, deps.app.sessionSecret);
    const key = idempotencyKey(req);
    await deps.app.gateway.admit({ userId, route: "order.create", key });
    const body = createOrderBody.safeParse(await jsonBody(req));
    if (!body.success) throw invalid(body.error.issues);
    const { replayed, keyExpiresAt, ...order } = await createOrder(
      deps.app.db,
      userId,
      { requestId: key, items: body.data.items },
      { idempotency: deps.app.idempotency },
    );
    // Parsing through the schema fixes the key order, so a replay is byte for byte the first answer.
    return created(orderResource.parse(order), `/api/v1/orders/${order.orderId}`, { replayed, keyExpiresAt });
  });
}

export function postPayment(deps: RestDeps, req: Request, rawOrderId: string): Promise<Response> {
  return respond(deps, async () => {
    const userId = authenticate(req, deps.app.sessionSecret);
    const key = idempotencyKey(req);
    const orderId = orderIdFrom(rawOrderId);
    await deps.app.gateway.admit({ userId, route: "payment.create", key });
    const { result, replayed, keyExpiresAt } = await createPaymentWithKey(
      deps.app.db,
      userId,
      key,
      { orderId },
      deps.app.payments,
      deps.app.idempotency,
    );
    return created(paymentResource.parse(result), `/api/v1/orders/${orderId}`, { replayed, keyExpiresAt });
  });
}

export function postRefund(deps: RestDeps, req: Request, rawOrderId: string): Promise<Response> {
  return respond(deps, async () => {
    const userId = authenticate(req, deps.app.sessionSecret);
    const key = idempotencyKey(req);
    const orderId = orderIdFrom(rawOrderId);
    await deps.app.gateway.admit({ userId, route: "refund.create", key });
    const body = createRefundBody.safeParse(await jsonBody(req));
    if (!body.success) throw invalid(body.error.issues);
    const { result, replayed, keyExpiresAt } = await createRefundWithKey(
      deps.app.db,
      userId,
      key,
      { orderId, amountCents: body.data.amountCents },
      deps.app.payments,
      deps.app.idempotency,
    );
    return created(refundResource.parse(result), `/api/v1/orders/${orderId}`, { replayed, keyExpiresAt });
  });
}

export function getOrder(deps: RestDeps, req: Request, rawOrderId: string): Promise<Response> {
  return respond(deps, async () => {
    const userId = authenticate(req, deps.app.sessionSecret);
    const orderId = orderIdFrom(rawOrderId);
    const order = await getOrderById(deps.app.db, userId, orderId);
    // getOrderById checked ownership; the rest is read once, without re-checking.
    const [payments, refunds] = await Promise.all([
      paymentsOfOrder(deps.app.db, orderId),
      refundsOfOrder(deps.app.db, orderId),
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
      })),
    });
  });
}

/** A new guest shopper and its bearer token (development convenience; API_TOKENS_ENABLED=false turns it off). */
export function postToken(deps: RestDeps): Promise<Response> {
  return respond(deps, async () => {
    if (!deps.tokensEnabled)
      return problem(403, "TOKENS_DISABLED", "Making tokens through the API is turned off.");
    return json(201, { token: signApiToken(newGuestId(), deps.app.sessionSecret) });
  });
}
