import { getAppContext } from "~/server/app-context";
import { handleTrpcRequest, plainTrpc } from "~/server/trpc/handler";
import { benchRouter } from "~/server/trpc/routers/bench";
import type { PlainRequest, PlainResponse } from "~/shared/plain-http";

const MOUNT = { router: benchRouter, endpoint: "/api/bench/trpc" };
const NOT_FOUND: PlainResponse = {
  status: 404,
  headers: { "content-type": "text/plain" },
  body: "not found",
};

/** The benchmark's unprotected baseline (scripts/bench.ts). 404 unless BENCH_ROUTES=true. */
const handler = Object.assign(
  (req: Request) => {
    const app = getAppContext();
    if (!app.benchRoutes) return new Response("not found", { status: 404 });
    return handleTrpcRequest(app, req, MOUNT);
  },
  {
    plain: async (req: PlainRequest) => {
      const app = getAppContext();
      return app.benchRoutes ? plainTrpc(app, req, MOUNT) : NOT_FOUND;
    },
  },
);

export { handler as GET, handler as POST };
