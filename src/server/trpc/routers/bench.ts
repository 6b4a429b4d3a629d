import { insertOrder, normaliseLines } from "~/server/orders/create-order";
import { createOrderInput } from "~/server/orders/schema";
import { router, shopperProcedure } from "~/server/trpc/init";

/**
 * The benchmark's baseline: the same procedure stack as `orders.create`
 * (session, validation, transformer, error mapping) and the same business insert
 * (`insertOrder`, in one transaction), with no idempotency record. Served only
 * when BENCH_ROUTES=true, at /api/bench/trpc; nothing else may use it.
 */
export const benchRouter = router({
  placeOrderUnprotected: shopperProcedure
    .input(createOrderInput)
    .mutation(({ ctx, input }) =>
      ctx.app.db.transaction(
        async (tx) => (await insertOrder(tx, ctx.userId, input.requestId, normaliseLines(input.items))).order,
      ),
    ),
});
