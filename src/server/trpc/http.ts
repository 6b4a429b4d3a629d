import type { AnyTRPCRouter } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import type { AppContext } from "../app-context";
import { DomainError } from "../errors";
import { createTrpcContext } from "./context";
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
