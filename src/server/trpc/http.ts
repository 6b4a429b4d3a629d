import type { AnyTRPCRouter, TRPCError } from "@trpc/server";
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
import { getLogger } from "~/shared/logger";
import type { PlainRequest, PlainResponse } from "~/shared/plain-http";
import { createTrpcContext, type TrpcContext } from "./context";
import { wasLogged } from "./init";
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
 * context, procedure, error shape, status, `vary`, the context's cookies, Retry-After), with no Web
 * `Request`, `Response`, `AbortController` or stream on the way. Anything else (queries, batches, another
 * content type, a body that does not parse) is handed to the fetch adapter before anything has run, so it
 * is answered exactly as before. test/plain-host.test.ts holds both to the same bytes.
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
  let answer: { result: { data: unknown } } | { error: unknown };
  let error: TRPCError | undefined;
  try {
    ctx = await createTrpcContext(app, req, headers).catch((cause: unknown) => {
      throw getTRPCErrorFromUnknown(cause);
    });
    const data = await call.procedure({
      path: call.path,
      getRawInput: async () => call.input,
      ctx,
      type: "mutation",
      signal: undefined,
      batchIndex: 0,
    });
    answer = { result: { data } };
  } catch (cause) {
    error = getTRPCErrorFromUnknown(cause);
    onError({ error, path: call.path, type: "mutation" });
    answer = {
      error: getErrorShape({ config, ctx, error, input: call.input, path: call.path, type: "mutation" }),
    };
  }
  const retryAfter = error ? retryAfterOf([error]) : undefined;
  if (retryAfter !== undefined) resHeaders.push(["retry-after", retryAfter]);
  const out: Record<string, string | string[]> = {
    vary: "trpc-accept, accept",
    "content-type": "application/json",
  };
  for (const [name, value] of resHeaders) {
    const had = out[name];
    if (name === "set-cookie") out[name] = [...((had as string[] | undefined) ?? []), value];
    else out[name] = had === undefined ? value : `${had}, ${value}`;
  }
  return {
    status: getHTTPStatusCode(answer as never),
    headers: out,
    body: JSON.stringify(transformTRPCResponse(config, answer as never)),
  };
}

/** The one mutation this request is, its input read, or undefined when the fetch adapter should answer. */
async function singleMutation(
  req: PlainRequest,
  mount: Mount,
): Promise<{ path: string; procedure: AnyProcedure; input: unknown } | undefined> {
  if (req.method !== "POST" || !req.url.startsWith(`${mount.endpoint}/`)) return undefined;
  const contentType = req.headers.get("content-type")?.toLowerCase().split(";", 1)[0]?.trim();
  if (contentType !== "application/json" || req.headers.get("trpc-accept") !== null) return undefined;
  const raw = req.url.slice(mount.endpoint.length + 1);
  if (raw === "" || /[?#,/%]/.test(raw)) return undefined;
  const procedure = (await getProcedureAtPath(mount.router, raw)) as AnyProcedure | null;
  if (procedure?._def.type !== "mutation") return undefined;
  try {
    const body: unknown = JSON.parse(await req.text());
    if (body === undefined) return undefined;
    return { path: raw, procedure, input: mount.router._def._config.transformer.input.deserialize(body) };
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
