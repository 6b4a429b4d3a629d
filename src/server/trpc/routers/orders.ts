import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { getOrderById, listOrders } from "~/server/orders/queries";
import { orderIdInput } from "~/server/orders/schema";
import { router, shopperProcedure } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/operation";

export const ordersRouter = router({
  get: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getOrderById(ctx.app.db, ctx.userId, input.orderId)),
  list: shopperProcedure.query(({ ctx }) => listOrders(ctx.app.db, ctx.userId)),
  cancel: mutationOf(cancelOrderOperation),
});
