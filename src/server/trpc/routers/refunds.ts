import { orderIdInput } from "~/server/orders/schema";
import { createRefund } from "~/server/refunds/create-refund";
import { listRefunds } from "~/server/refunds/queries";
import { createRefundInput } from "~/server/refunds/schema";
import { router, shopperProcedure, throughGateway } from "~/server/trpc/init";

export const refundsRouter = router({
  create: shopperProcedure
    .input(createRefundInput)
    .use(throughGateway("refund.create", (input: { refundNo: string }) => input.refundNo))
    .mutation(({ ctx, input }) => createRefund(ctx.app.db, ctx.userId, input, ctx.app.payments)),
  list: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => listRefunds(ctx.app.db, ctx.userId, input.orderId)),
});
