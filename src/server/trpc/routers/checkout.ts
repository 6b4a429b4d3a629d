import { createOrder } from "~/server/orders/create-order";
import { createOrderInput } from "~/server/orders/schema";
import { router, shopperProcedure, throughGateway } from "~/server/trpc/init";

export const checkoutRouter = router({
  createOrder: shopperProcedure
    .input(createOrderInput)
    .use(throughGateway("order.create", (input: { requestId: string }) => input.requestId))
    .mutation(({ ctx, input }) =>
      createOrder(ctx.app.db, ctx.userId, input, { idempotency: ctx.app.idempotency }),
    ),
});
