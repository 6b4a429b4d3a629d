import { getAppContext } from "~/server/app-context";
import { handleTrpcRequest } from "~/server/trpc/http";

function handler(req: Request) {
  return handleTrpcRequest(getAppContext(), req);
}

export { handler as GET, handler as POST };
