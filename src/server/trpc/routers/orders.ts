import { orderIdInput } from "~/server/db/order-ref";
import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { createOrderOperation } from "~/server/orders/create-order";
import { getOrderById, getOrderMoney, listOrders } from "~/server/orders/queries";
import { ownOrderStory } from "~/server/story/story";
import { router, shopperProcedure } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/mutation";

export const ordersRouter = router({
  create: mutationOf(createOrderOperation),
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
