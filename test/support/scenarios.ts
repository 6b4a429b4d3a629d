import { randomUUID } from "node:crypto";
import type { AppContext } from "../../src/server/app-context";
import { createOrder } from "../../src/server/orders/create-order";
import type { OrderLine } from "../../src/server/orders/schema";
import { createPayment } from "../../src/server/payments/create-payment";
import { handlePaymentNotification } from "../../src/server/payments/notify";
import { signBody } from "../../src/server/provider/contract";

/** A shopper's order, paid through a signed success notification as the provider would send it. */
export async function placePaidOrder(app: AppContext, items: OrderLine[]) {
  const userId = randomUUID();
  const order = await createOrder(app.db, userId, { requestId: randomUUID(), items });
  const payment = await createPayment(app.db, userId, { orderId: order.orderId }, app.payments);
  const body = JSON.stringify({
    id: `evt_${randomUUID()}`,
    type: "payment.succeeded",
    app_id: app.payments.appId,
    out_trade_no: payment.outTradeNo,
    transaction_id: `T${randomUUID().slice(0, 12)}`,
    amount_cents: payment.amountCents,
    currency: payment.currency,
    created_at: new Date().toISOString(),
  });
  const answer = await handlePaymentNotification(
    app.db,
    {
      body,
      signature: signBody(app.payments.webhookSecret, body, Math.floor(Date.now() / 1000)),
      deliveryId: randomUUID(),
    },
    app.payments,
  );
  if (answer.httpStatus !== 200) throw new Error(`payment failed: ${JSON.stringify(answer.body)}`);
  return { userId, orderId: order.orderId, amountCents: order.amountCents, outTradeNo: payment.outTradeNo };
}
