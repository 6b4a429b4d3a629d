import { getAppContext } from "~/server/app-context";
import { handleTrpcRequest } from "~/server/trpc/http";
import { benchRouter } from "~/server/trpc/routers/bench";

/** The benchmark's unprotected baseline (scripts/bench.ts). 404 unless BENCH_ROUTES=true. */
function handler(req: Request) {
  const app = getAppContext();
  if (!app.benchRoutes) return new Response("not found", { status: 404 });
  return handleTrpcRequest(app, req, { router: benchRouter, endpoint: "/api/bench/trpc" });
}

export { handler as GET, handler as POST };
