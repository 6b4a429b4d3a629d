import { restDeps } from "~/server/rest/deps";
import { postRefund } from "~/server/rest/handlers";

export const dynamic = "force-dynamic";

export async function POST(req: Request, { params }: { params: Promise<{ orderId: string }> }) {
  return postRefund(restDeps(), req, (await params).orderId);
}
