import { restDeps } from "~/server/rest/deps";
import { getOrder } from "~/server/rest/handlers";

export async function GET(req: Request, { params }: { params: Promise<{ orderId: string }> }) {
  return getOrder(restDeps(), req, (await params).orderId);
}
