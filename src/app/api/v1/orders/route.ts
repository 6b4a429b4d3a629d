import { restDeps } from "~/server/rest/deps";
import { postOrder } from "~/server/rest/handlers";

export const dynamic = "force-dynamic";

export function POST(req: Request) {
  return postOrder(restDeps(), req);
}
