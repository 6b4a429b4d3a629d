import { createOrder } from "../../orders/create-order";
import { createOrderInput } from "../../orders/schema";
import { router, shopperProcedure } from "../init";

export const checkoutRouter = router({
  createOrder: shopperProcedure
    .input(createOrderInput)
    .mutation(({ ctx, input }) =>
      createOrder(ctx.app.db, ctx.userId, input, { idempotency: ctx.app.idempotency }),
    ),
});
