import { orderIdInput } from "~/server/db/order-ref";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { getPaymentTimeline } from "~/server/payments/queries";
import { checkOrderPayment } from "~/server/payments/status-query";
import { router, shopperProcedure } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/mutation";

export const paymentsRouter = router({
  create: mutationOf(createPaymentOperation),
  // Not an idempotent operation (it changes nothing the provider has not already decided), but each call
  // asks the provider a signed question: admitted by the gateway like the writes, and coalesced.
  checkStatus: shopperProcedure
    .meta({ gateway: {} })
    .input(orderIdInput)
    .mutation(({ ctx, input }) => checkOrderPayment(ctx.app.db, ctx.userId, input.orderId, ctx.app.payments)),
  timeline: shopperProcedure
    .input(orderIdInput)
    .query(({ ctx, input }) => getPaymentTimeline(ctx.app.db, ctx.userId, input.orderId)),
});
