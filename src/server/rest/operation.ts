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
    // `Prefer: wait=N` (RFC 7240): a client that would rather be told at once (or sooner) that the first
    // request with its key is still running than wait for its answer, as the Idempotency-Key draft's §2.6 has it.
    const wait = preferredWaitS(req.headers.get("prefer"));
    const config =
      wait === undefined
        ? deps.app.idempotency
        : { ...deps.app.idempotency, waitMs: Math.min(deps.app.idempotency.waitMs, wait * 1000) };
    const { replayed, keyExpiresAt, ...result } = await runOperation(
      deps.app.db,
      op,
      { userId, input, deps: deps.app, key },
      config,
    );
    const headers = keyHeaders({ replayed, keyExpiresAt });
    // RFC 7240 §3: the answer says the preference was honoured (a refusal need not; the 409 says it anyway).
    if (wait !== undefined) headers["preference-applied"] = `wait=${wait}`;
    if (binding.location) headers.location = binding.location(result as R, input);
    return json(binding.status, binding.resource.parse(result), headers);
  });
}

/** The `wait` preference of a `Prefer` header (RFC 7240 §4.3), in whole seconds, if the client stated one. */
export function preferredWaitS(prefer: string | null): number | undefined {
  if (!prefer) return undefined;
  for (const preference of prefer.split(",")) {
    const match = /^\s*wait\s*=\s*"?(\d{1,6})"?\s*(;.*)?$/i.exec(preference);
    if (match) return Number(match[1]);
  }
  return undefined;
}
