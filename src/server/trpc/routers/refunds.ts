import { orderIdInput } from "~/server/db/order-ref";
import { createRefundOperation } from "~/server/refunds/create-refund";
import { listRefunds } from "~/server/refunds/queries";
import { router, shopperProcedure } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/mutation";

export const refundsRouter = router({
  create: mutationOf(createRefundOperation),
  list: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => listRefunds(ctx.app.db, ctx.userId, input.orderId)),
});
