import { and, eq } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { isOrder, type OrderRef } from "~/server/db/order-ref";
import { paymentOrder } from "~/server/db/schema";
import { CLOSE_API, type CloseRequest, closeAnswerSchema } from "~/shared/provider-contract";
import { type ProviderClientDeps, postToProvider } from "./provider-client";
import type { RefundsPort } from "./refunds-port";
import { applyFactFromProvider } from "./status-query";

/**
 * Asks the provider to close every open payment of an order, and applies each
 * answer as a fact: CLOSED closes the payment here; PAID (the shopper confirmed
 * first) pays it, so the order follows its payment. Idempotent by out_trade_no
 * at the provider and by conditional updates here: safe to repeat.
 */
/** What closing an order's payments needs: the provider, and refunds (a close may answer PAID, late). */
export type CloseDeps = ProviderClientDeps & { refunds: RefundsPort };

export async function closeOpenPayments(db: Db, order: OrderRef, deps: CloseDeps): Promise<void> {
  const open = await db
    .select({
      outTradeNo: paymentOrder.outTradeNo,
      amountCents: paymentOrder.amountCents,
      currency: paymentOrder.currency,
    })
    .from(paymentOrder)
    .where(and(isOrder(paymentOrder, paymentOrder.orderId, order), eq(paymentOrder.status, "PENDING")));
  for (const payment of open) {
    const request: CloseRequest = {
      app_id: deps.appId,
      out_trade_no: payment.outTradeNo,
      amount_cents: payment.amountCents,
      currency: payment.currency,
    };
    const answer = await postToProvider(deps, CLOSE_API, request, closeAnswerSchema);
    await applyFactFromProvider(
      db,
      "close",
      {
        id: `close:${payment.outTradeNo}:${answer.status}`,
        type: answer.status === "PAID" ? "payment.succeeded" : "payment.closed",
        app_id: deps.appId,
        out_trade_no: payment.outTradeNo,
        transaction_id: answer.transaction_id,
        amount_cents: payment.amountCents,
        currency: payment.currency,
        created_at: new Date().toISOString(),
      },
      deps.refunds,
    );
  }
}
