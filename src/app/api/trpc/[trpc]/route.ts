import { getAppContext } from "~/server/app-context";
import { handleTrpcRequest, plainTrpc } from "~/server/trpc/handler";
import type { PlainRequest } from "~/shared/plain-http";

/** `next dev` calls the Web handler; the production host calls `plain` (src/host/route-table.ts). */
const handler = Object.assign((req: Request) => handleTrpcRequest(getAppContext(), req), {
  plain: (req: PlainRequest) => plainTrpc(getAppContext(), req),
});

export { handler as GET, handler as POST };
