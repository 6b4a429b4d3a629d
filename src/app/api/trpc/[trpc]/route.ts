import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { getAppContext } from "../../../../server/app-context";
import { DomainError } from "../../../../server/errors";
import { createTrpcContext } from "../../../../server/trpc/context";
import { appRouter } from "../../../../server/trpc/root";

export const dynamic = "force-dynamic";

function handler(req: Request) {
  const app = getAppContext();
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
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

export { handler as GET, handler as POST };
