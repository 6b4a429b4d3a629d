import { orderIdInput } from "../../orders/schema";
import { createRefund } from "../../refunds/create-refund";
import { listRefunds } from "../../refunds/queries";
import { createRefundInput } from "../../refunds/schema";
import { router, shopperProcedure, throughGateway } from "../init";

export const refundsRouter = router({
  create: shopperProcedure
    .input(createRefundInput)
    .use(throughGateway("refund.create", (input: { refundNo: string }) => input.refundNo))
    .mutation(({ ctx, input }) => createRefund(ctx.app.db, ctx.userId, input, ctx.app.payments)),
  list: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => listRefunds(ctx.app.db, ctx.userId, input.orderId)),
});
