import { randomUUID } from "node:crypto";
import { getEnv } from "../../../../env";
import { getAppContext } from "../../../../server/app-context";
import { insertOrderUnprotected } from "../../../../server/orders/plain-order";

export const dynamic = "force-dynamic";

/** Benchmark baseline (an unprotected insert). 404 unless BENCH_ROUTES=true. */
export async function POST() {
  if (!getEnv().BENCH_ROUTES) return new Response("not found", { status: 404 });
  const order = await insertOrderUnprotected(getAppContext().db, "bench-baseline", randomUUID(), [
    { skuId: "SKU-MUG", quantity: 1 },
  ]);
  return Response.json(order, { status: 201 });
}
