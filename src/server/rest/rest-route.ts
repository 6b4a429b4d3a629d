import type { z } from "zod";
import { admit } from "~/server/admission/admission";
import type { AppContext } from "~/server/app-context";
import { DomainError } from "~/server/errors";
import { forRequest } from "~/server/observability/request-observer";
import { type Operation, serveOperation } from "~/server/operations";
import {
  fromWebRequest,
  jsonTextAnswer,
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
  jsonBody,
  keyHeaders,
  type RestDeps,
  respond,
} from "./protocol";

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
  return respond(deps, req, async (requestId) => {
    const request = await authenticate(req, deps.app, requestId);
    const { userId } = request;
    const key = idempotencyKey(req);
    // `Prefer: wait=N` (RFC 7240): a client that would rather be told at once (or sooner) that the first
    // request with its key is still running than wait for its answer, as the Idempotency-Key draft's §2.6 has it.
    const wait = preferredWaitS(req.headers.get("prefer"));
    const settings = deps.app.idempotency;
    const config = forRequest(
      wait === undefined ? settings : { ...settings, waitMs: Math.min(settings.waitMs, wait * 1000) },
      requestId,
    );
    // Per client address first, whoever the token says the client is (a new token is cheap), then per shopper.
    const admitted = (gatewayKey: string | undefined) =>
      admit(request, {
        action: "write",
        route: op.name,
        userId,
        perShopper: op.gateway !== "off",
        ...(gatewayKey !== undefined ? { key: gatewayKey } : {}),
      });
    // A known replay: this path and body, under this key, were answered before; the answer needs no parsing,
    // validation or hashing again (docs/idempotency.md, "Known replays"). Admitted like any other write.
    const requestText = wait === undefined ? `${req.url}\n${await req.text()}` : undefined;
    const served = await serveOperation(deps.app.db, op, {
      userId,
      deps: deps.app,
      key,
      config,
      ...(requestText !== undefined ? { requestText } : {}),
      admit: admitted,
      read: async () => {
        const params = binding.params ? binding.params.safeParse(pathParams) : undefined;
        if (params && !params.success) {
          throw new DomainError(
            binding.notFound ?? "INVALID_INPUT",
            "not found: a path parameter is malformed",
          );
        }
        const body = binding.body ? binding.body.safeParse(await jsonBody(req)) : undefined;
        if (body && !body.success) throw invalid(body.error.issues);
        const parsed = op.input.safeParse({
          ...(params?.data ?? {}),
          ...(body?.data ?? {}),
          ...(op.key.kind === "client" ? { [op.key.field]: op.key.fromHeader?.(userId, key) ?? key } : {}),
        });
        if (!parsed.success) throw invalid(parsed.error.issues);
        return parsed.data as z.output<S>;
      },
      render: (answer, input) => {
        const { replayed: _replayed, keyExpiresAt, ...result } = answer;
        const rendering: Rendering = {
          status: binding.status,
          body: JSON.stringify(binding.resource.parse(result)),
          headers: keyHeaders({ keyExpiresAt }),
          ...(binding.location ? { location: binding.location(result as R, input) } : {}),
        };
        return { rendering, chars: rendering.body.length };
      },
    });
    return answerOf(served.rendering, served.replayed ? REPLAYED : {}, wait);
  });
}

/** What a REST call's answer is made of, kept for a known replay: all of it but the replay header. */
interface Rendering {
  status: number;
  /** The resource, parsed through its schema (so a replay is byte for byte) and serialised. */
  body: string;
  /** When the key expires (the same on every answer under it). */
  headers: Record<string, string>;
  location?: string;
}

const REPLAYED = keyHeaders({ replayed: true });

function answerOf(
  rendering: Rendering,
  replayed: Record<string, string>,
  wait: number | undefined,
): PlainResponse {
  const headers = { ...rendering.headers, ...replayed };
  // RFC 7240 §3: the answer says the preference was honoured (a refusal need not; the 409 says it anyway).
  if (wait !== undefined) headers["preference-applied"] = `wait=${wait}`;
  if (rendering.location !== undefined) headers.location = rendering.location;
  return jsonTextAnswer(rendering.status, rendering.body, headers);
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
