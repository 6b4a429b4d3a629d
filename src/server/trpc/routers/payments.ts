import { orderIdInput } from "~/server/orders/schema";
import { createPayment } from "~/server/payments/create-payment";
import { getPaymentTimeline } from "~/server/payments/queries";
import { checkOrderPayment } from "~/server/payments/status-query";
import { router, shopperProcedure, throughGateway } from "~/server/trpc/init";

export const paymentsRouter = router({
  create: shopperProcedure
    .input(orderIdInput)
    .use(throughGateway("payment.create", (input: { orderId: string }) => input.orderId))
    .mutation(({ ctx, input }) => createPayment(ctx.app.db, ctx.userId, input, ctx.app.payments)),
  checkStatus: shopperProcedure
    .input(orderIdInput)
    .mutation(({ ctx, input }) => checkOrderPayment(ctx.app.db, ctx.userId, input.orderId, ctx.app.payments)),
  timeline: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getPaymentTimeline(ctx.app.db, ctx.userId, input.orderId)),
});
