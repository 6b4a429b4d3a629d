import { getOrderById, listOrders } from "../../orders/queries";
import { orderIdInput } from "../../orders/schema";
import { router, shopperProcedure } from "../init";

export const ordersRouter = router({
  get: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getOrderById(ctx.app.db, ctx.userId, input.orderId)),
  list: shopperProcedure.query(({ ctx }) => listOrders(ctx.app.db, ctx.userId)),
});
