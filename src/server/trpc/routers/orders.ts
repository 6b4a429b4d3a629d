import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { getOrderById, getOrderMoney, listOrders } from "~/server/orders/queries";
import { orderIdInput } from "~/server/orders/schema";
import { ownOrderStory } from "~/server/orders/story";
import { router, shopperProcedure } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/operation";

export const ordersRouter = router({
  get: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getOrderById(ctx.app.db, ctx.userId, input.orderId)),
  list: shopperProcedure.query(({ ctx }) => listOrders(ctx.app.db, ctx.userId)),
  money: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getOrderMoney(ctx.app.db, ctx.userId, input.orderId)),
  story: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => ownOrderStory(ctx.app.db, ctx.userId, input.orderId)),
  cancel: mutationOf(cancelOrderOperation),
});
