import type { z } from "zod";
import { admit } from "~/server/admission/admission";
import type { AppContext } from "~/server/app-context";
import { DomainError } from "~/server/errors";
import { gatewayKeyOf, type Operation, runOperation } from "~/server/idempotency";
import {
  fromWebRequest,
  type PlainRequest,
  type PlainResponse,
  plainRoute,
  type RouteWithPlain,
  toWebResponse,
} from "~/shared/plain-http";
import { restDeps } from "./deps";
import {
  authenticate,
  idempotencyKey,
  invalid,
  json,
  jsonBody,
  keyHeaders,
  type RestDeps,
  respond,
} from "./http";

type Params = Record<string, string>;
export type RestRoute = RouteWithPlain & {
  /** The operation this route mounts (the transport test reads it). */
  operation: string;
};

/**
 * Mounts a defined operation as a REST route handler: bearer token, Idempotency-Key,
 * gateway, path and body assembled into the operation's input, and the answer in its
 * resource's shape (so a replay is byte for byte the first answer). A route file is
 * one line: `export const POST = restRoute(createRefundOperation);`.
 */
export function restRoute<S extends z.ZodType, R>(op: Operation<S, R, AppContext>): RestRoute {
  if (!op.rest) throw new Error(`${op.name} has no REST binding`);
  return Object.assign(
    plainRoute((req, params) => plainOperation(restDeps(), op, req, params)),
    { operation: op.name },
  );
}

/** One REST call of an operation as Web `Request` → `Response` (tests call it so). */
export async function handleOperation<S extends z.ZodType, R>(
  deps: RestDeps,
  op: Operation<S, R, AppContext>,
  req: Request,
  pathParams: Params = {},
): Promise<Response> {
  return toWebResponse(await plainOperation(deps, op, fromWebRequest(req), pathParams));
}

/** One REST call of an operation, with the dependencies given (the route passes the app's; tests their own). */
export function plainOperation<S extends z.ZodType, R>(
  deps: RestDeps,
  op: Operation<S, R, AppContext>,
  req: PlainRequest,
  pathParams: Params = {},
): Promise<PlainResponse> {
  const binding = op.rest;
  if (!binding) throw new Error(`${op.name} has no REST binding`);
  return respond(deps, req, async () => {
    const request = await authenticate(req, deps.app);
    const { userId } = request;
    const key = idempotencyKey(req);
    const params = binding.params ? binding.params.safeParse(pathParams) : undefined;
    if (params && !params.success) {
      throw new DomainError(binding.notFound ?? "INVALID_INPUT", "not found: a path parameter is malformed");
    }
    const body = binding.body ? binding.body.safeParse(await jsonBody(req)) : undefined;
    if (body && !body.success) throw invalid(body.error.issues);
    const parsed = op.input.safeParse({
      ...(params?.data ?? {}),
      ...(body?.data ?? {}),
      ...(op.key.kind === "client" ? { [op.key.field]: op.key.fromHeader?.(userId, key) ?? key } : {}),
    });
    if (!parsed.success) throw invalid(parsed.error.issues);
    const input = parsed.data as z.output<S>;
    // Per client address first, whoever the token says the client is (a new token is cheap), then per shopper.
    const gatewayKey = gatewayKeyOf(op as never, { input, key });
    await admit(request, {
      action: "write",
      route: op.name,
      userId,
      perShopper: op.gateway !== "off",
      ...(gatewayKey !== undefined ? { key: gatewayKey } : {}),
    });
    const { replayed, keyExpiresAt, ...result } = await runOperation(
      deps.app.db,
      op,
      { userId, input, deps: deps.app, key },
      deps.app.idempotency,
    );
    const headers = keyHeaders({ replayed, keyExpiresAt });
    if (binding.location) headers.location = binding.location(result as R, input);
    return json(binding.status, binding.resource.parse(result), headers);
  });
}
