import { orderIdInput } from "../../orders/schema";
import { createRefund } from "../../refunds/create-refund";
import { listRefunds } from "../../refunds/queries";
import { createRefundInput } from "../../refunds/schema";
import { router, shopperProcedure } from "../init";

export const refundsRouter = router({
  create: shopperProcedure
    .input(createRefundInput)
    .mutation(({ ctx, input }) => createRefund(ctx.app.db, ctx.userId, input, ctx.app.payments)),
  list: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => listRefunds(ctx.app.db, ctx.userId, input.orderId)),
});
