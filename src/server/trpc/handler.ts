import { type AnyTRPCRouter, TRPCError } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import {
  type AnyProcedure,
  getErrorShape,
  getHTTPStatusCode,
  getProcedureAtPath,
  getTRPCErrorFromUnknown,
  transformTRPCResponse,
} from "@trpc/server/unstable-core-do-not-import";
import type { AppContext } from "~/server/app-context";
import { DomainError } from "~/server/errors";
import { forRequest } from "~/server/observability/request-observer";
import { type AnyOperation, keyOfRawInput, serveOperation } from "~/server/operations";
import { getLogger } from "~/shared/logger";
import type { PlainRequest, PlainResponse } from "~/shared/plain-http";
import { createTrpcContext, type TrpcContext } from "./context";
import { admitMutation, asTrpcError, type ProcedureMeta, wasLogged } from "./init";
import { TRPC_MAX_BATCH_SIZE } from "./limits";
import { appRouter } from "./root";

interface Mount {
  router: AnyTRPCRouter;
  endpoint: string;
}
const APP: Mount = { router: appRouter, endpoint: "/api/trpc" };

/**
 * Procedures log their own unknown errors (init.ts); this catches the ones raised around them (reading the
 * request, making the context), which would otherwise answer 500 without a trace.
 */
function onError({ error, path, type }: { error: TRPCError; path?: string; type: string }) {
  if (error.code !== "INTERNAL_SERVER_ERROR" || wasLogged(error)) return;
  getLogger().error({ err: error.cause ?? error, path, type }, "unhandled error around a procedure");
}

/** A refusal that says when to come back answers with Retry-After (the longest of a batch's). */
function retryAfterOf(errors: TRPCError[]): string | undefined {
  const waits = errors.flatMap((error) =>
    error.cause instanceof DomainError && error.cause.details.retryAfterMs
      ? [error.cause.details.retryAfterMs]
      : [],
  );
  return waits.length === 0 ? undefined : String(Math.ceil(Math.max(...waits) / 1000));
}

/** tRPC over HTTP (fetch Request in, Response out): `next dev`'s route handler, and tests, call this. */
export function handleTrpcRequest(app: AppContext, req: Request, mount: Mount = APP): Promise<Response> {
  return fetchRequestHandler({
    endpoint: mount.endpoint,
    req,
    router: mount.router,
    createContext: ({ req, resHeaders }) => createTrpcContext(app, req, resHeaders),
    maxBatchSize: TRPC_MAX_BATCH_SIZE,
    onError,
    responseMeta({ errors }) {
      const retryAfter = retryAfterOf(errors);
      return retryAfter === undefined ? {} : { headers: new Headers({ "retry-after": retryAfter }) };
    },
  });
}

/**
 * tRPC over plain HTTP (src/shared/plain-http.ts), as the production host serves it. The call a shop page
 * makes for every write — one mutation, unbatched (the client's httpLink: `POST /api/trpc/<path>`, a JSON
 * body `{"json": …}`) — is answered here the way tRPC's fetch adapter answers it (its resolveResponse:
 * context, error shape, status, `vary`, the context's cookies, Retry-After), with no Web `Request`,
 * `Response`, `AbortController` or stream on the way. A mutation that mounts an operation (its meta carries
 * it) is run here as its procedure runs it: admission, the input parsed by the operation's schema, the
 * operation (serveOperation); any other, by its procedure. Anything else (queries, batches, another
 * content type, a body that does not parse) is handed to the fetch adapter before anything has run, so it
 * is answered by tRPC itself. test/plain-host.test.ts holds both paths to the same bytes.
 */
export async function plainTrpc(
  app: AppContext,
  req: PlainRequest,
  mount: Mount = APP,
): Promise<PlainResponse> {
  const call = await singleMutation(req, mount);
  if (!call) return fromWeb(await handleTrpcRequest(app, await req.toWeb(), mount));

  const config = mount.router._def._config;
  const resHeaders: [string, string][] = [];
  const headers = {
    append: (name: string, value: string) => void resHeaders.push([name.toLowerCase(), value]),
  };
  let ctx: TrpcContext | undefined;
  try {
    const context = await createTrpcContext(app, req, headers).catch((cause: unknown) => {
      throw getTRPCErrorFromUnknown(cause);
    });
    ctx = context;
    const op = (call.procedure._def.meta as ProcedureMeta | undefined)?.operation;
    const body = await (op
      ? servedOperation(app, context, call, op, mount)
      : procedureAnswer(context, call, mount));
    return answerOf(200, resHeaders, body);
  } catch (cause) {
    const error = getTRPCErrorFromUnknown(cause);
    onError({ error, path: call.path, type: "mutation" });
    const answer = {
      error: getErrorShape({ config, ctx, error, input: call.input, path: call.path, type: "mutation" }),
    };
    const retryAfter = retryAfterOf([error]);
    if (retryAfter !== undefined) resHeaders.push(["retry-after", retryAfter]);
    return answerOf(
      getHTTPStatusCode(answer as never),
      resHeaders,
      JSON.stringify(transformTRPCResponse(config, answer as never)),
    );
  }
}

/** The answer as tRPC's fetch adapter writes it: its headers, the context's (cookies), the envelope. */
function answerOf(status: number, resHeaders: [string, string][], body: string): PlainResponse {
  const out: Record<string, string | string[]> = {
    vary: "trpc-accept, accept",
    "content-type": "application/json",
  };
  for (const [name, value] of resHeaders) {
    const had = out[name];
    if (name === "set-cookie") out[name] = [...((had as string[] | undefined) ?? []), value];
    else out[name] = had === undefined ? value : `${had}, ${value}`;
  }
  return { status, headers: out, body };
}

/**
 * A mutation that mounts an operation, answered as its procedure answers it, in one call into the operation
 * layer (serveOperation): admitted first (the procedure's middleware admits before the input is read), then a
 * known replay (docs/idempotency.md, "Known replays": this shopper sent this very body to this procedure under
 * this key before, and the envelope it was answered with is answered again), else its input parsed once by the
 * operation's schema, run, and its envelope rendered (and kept when it is a replay).
 */
async function servedOperation(
  app: AppContext,
  ctx: TrpcContext,
  call: SingleMutation,
  op: AnyOperation,
  mount: Mount,
): Promise<string> {
  const meta = call.procedure._def.meta as ProcedureMeta;
  let admission: Promise<void> | undefined;
  const admitted = () => {
    admission ??= admitMutation(ctx, call.path, meta, call.input);
    return admission;
  };
  const replayKey = keyOfRawInput(op, call.input, "record");
  // Admitted before anything else, as the procedure's middleware admits: a refusal is a tRPC error already.
  await admitted();
  try {
    const served = await serveOperation<AnyOperation["input"], unknown, AppContext, string>(app.db, op, {
      userId: ctx.userId,
      deps: app,
      ...(replayKey !== undefined ? { replayKey, requestText: replayText(call) } : {}),
      config: forRequest(app.idempotency, ctx.requestId),
      admit: admitted,
      read: async () => {
        const parsed = await op.input.safeParseAsync(call.input);
        if (!parsed.success) throw new TRPCError({ code: "BAD_REQUEST", cause: parsed.error });
        return parsed.data;
      },
      render: (answer) => {
        const body = JSON.stringify(
          transformTRPCResponse(mount.router._def._config, { result: { data: answer } } as never),
        );
        return { rendering: body, chars: body.length };
      },
    });
    return served.rendering;
  } catch (error) {
    throw asTrpcError(error, { path: call.path, type: "mutation", ctx });
  }
}

/** Any other single mutation: its procedure, as tRPC runs it. */
async function procedureAnswer(ctx: TrpcContext, call: SingleMutation, mount: Mount): Promise<string> {
  const data = await call.procedure({
    path: call.path,
    getRawInput: async () => call.input,
    ctx,
    type: "mutation",
    signal: undefined,
    batchIndex: 0,
  });
  return JSON.stringify(transformTRPCResponse(mount.router._def._config, { result: { data } } as never));
}

/** What decides a mutation's input besides the shopper: the procedure and the body as sent. */
const replayText = (call: SingleMutation) => `${call.path}\n${call.text}`;

/** The one mutation this request is, its input read, or undefined when the fetch adapter should answer. */
interface SingleMutation {
  path: string;
  procedure: AnyProcedure;
  /** The body as sent. */
  text: string;
  /** Its input, deserialised by the router's transformer. */
  input: unknown;
}

async function singleMutation(req: PlainRequest, mount: Mount): Promise<SingleMutation | undefined> {
  if (req.method !== "POST" || !req.url.startsWith(`${mount.endpoint}/`)) return undefined;
  const contentType = req.headers.get("content-type")?.toLowerCase().split(";", 1)[0]?.trim();
  if (contentType !== "application/json" || req.headers.get("trpc-accept") !== null) return undefined;
  const raw = req.url.slice(mount.endpoint.length + 1);
  if (raw === "" || /[?#,/%]/.test(raw)) return undefined;
  const procedure = (await getProcedureAtPath(mount.router, raw)) as AnyProcedure | null;
  if (procedure?._def.type !== "mutation") return undefined;
  try {
    const text = await req.text();
    const body: unknown = JSON.parse(text);
    if (body === undefined) return undefined;
    return {
      path: raw,
      procedure,
      text,
      input: mount.router._def._config.transformer.input.deserialize(body),
    };
  } catch {
    return undefined;
  }
}

async function fromWeb(response: Response): Promise<PlainResponse> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie") headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  return { status: response.status, headers, body: await response.text() };
}
