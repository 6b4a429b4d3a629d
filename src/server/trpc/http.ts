import type { AnyTRPCRouter } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import type { AppContext } from "~/server/app-context";
import { DomainError } from "~/server/errors";
import { getLogger } from "~/shared/logger";
import { createTrpcContext } from "./context";
import { wasLogged } from "./init";
import { TRPC_MAX_BATCH_SIZE } from "./limits";
import { appRouter } from "./root";

/** tRPC over HTTP (fetch Request in, Response out): the route handler, and tests, call this. */
export function handleTrpcRequest(
  app: AppContext,
  req: Request,
  mount: { router: AnyTRPCRouter; endpoint: string } = { router: appRouter, endpoint: "/api/trpc" },
): Promise<Response> {
  return fetchRequestHandler({
    endpoint: mount.endpoint,
    req,
    router: mount.router,
    createContext: ({ req, resHeaders }) => createTrpcContext(app, req, resHeaders),
    maxBatchSize: TRPC_MAX_BATCH_SIZE,
    // Procedures log their own unknown errors (init.ts); this catches the ones raised around them (reading the
    // request, building the response), which would otherwise answer 500 without a trace.
    onError({ error, path, type }) {
      if (error.code !== "INTERNAL_SERVER_ERROR" || wasLogged(error)) return;
      getLogger().error({ err: error.cause ?? error, path, type }, "unhandled error around a procedure");
    },
    responseMeta({ errors }) {
      const waits = errors.flatMap((error) =>
        error.cause instanceof DomainError && error.cause.details.retryAfterMs
          ? [error.cause.details.retryAfterMs]
          : [],
      );
      if (waits.length === 0) return {};
      return { headers: new Headers({ "retry-after": String(Math.ceil(Math.max(...waits) / 1000)) }) };
    },
  });
}
