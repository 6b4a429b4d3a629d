import { normaliseLines } from "~/server/orders/create-order";
import { insertOrderUnprotected } from "~/server/orders/plain-order";
import { createOrderInput } from "~/server/orders/schema";
import { router, shopperProcedure } from "~/server/trpc/init";

/**
 * The benchmark's baseline: the same procedure stack as `checkout.createOrder`
 * (session, validation, transformer, error mapping) and the same insert, with
 * no idempotency record. Served only when BENCH_ROUTES=true, at /api/bench/trpc.
 */
export const benchRouter = router({
  placeOrderUnprotected: shopperProcedure
    .input(createOrderInput)
    .mutation(({ ctx, input }) =>
      insertOrderUnprotected(ctx.app.db, ctx.userId, input.requestId, normaliseLines(input.items)),
    ),
});
