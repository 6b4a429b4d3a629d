import { randomUUID } from "node:crypto";
import type { MockPayContext } from "~/mockpay/server/context";
import { deliverDueNotifications } from "~/mockpay/server/delivery";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import type { AppContext } from "~/server/app-context";
import { createOrder } from "~/server/orders/create-order";
import type { OrderLine } from "~/server/orders/schema";
import { createPayment } from "~/server/payments/create-payment";
import { handlePaymentNotification } from "~/server/payments/notify";
import { createCaller } from "~/server/trpc/root";
import { payRequestSchema, signBody } from "~/shared/provider-contract";

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

/**
 * The whole payment conversation over loopback HTTP: pay link, provider trade,
 * confirmation, notifications delivered until acknowledged.
 */
export async function payThroughProvider(
  app: AppContext,
  mockPay: MockPayContext,
  items: OrderLine[],
  { userId = randomUUID(), couponCode }: { userId?: string; couponCode?: string } = {},
) {
  const order = await createOrder(app.db, userId, { requestId: randomUUID(), items, couponCode });
  const payment = await createPayment(app.db, userId, { orderId: order.orderId }, app.payments);
  const { sig, ...request } = payRequestSchema.parse(
    Object.fromEntries(new URL(payment.payUrl, "http://x").searchParams),
  );
  await openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
  await confirmTrade(mockPay.db, mockPay.appId, payment.outTradeNo);
  await deliverAll(mockPay);
  return { userId, orderId: order.orderId, amountCents: order.amountCents, outTradeNo: payment.outTradeNo };
}

/** Runs the provider's delivery worker until nothing is due (bounded). */
export async function deliverAll(mockPay: MockPayContext, rounds = 30) {
  for (let round = 0; round < rounds; round++) {
    const sent = await deliverDueNotifications(mockPay.db, { ...mockPay.delivery, sendDuplicates: true });
    const [due] = await mockPay.db.$client<{ n: number }[]>`
      SELECT count(*)::int AS n FROM provider_notification WHERE status = 'PENDING' AND next_attempt_at <= now() + interval '1 second'`;
    if (sent === 0 && (due?.n ?? 0) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A new shopper's order with its payment opened (MockPay's pay page opened too, unless `open: false`):
 * the starting point of every cancel, timeout and late-payment story.
 */
export async function orderAwaitingPayment(
  app: AppContext,
  mockPay: MockPayContext,
  { open = true, items = [{ skuId: "SKU-MUG", quantity: 1 }] }: { open?: boolean; items?: OrderLine[] } = {},
) {
  const userId = randomUUID();
  const caller = createCaller({ app, userId, requestId: randomUUID() });
  const { orderId } = await caller.checkout.createOrder({ requestId: randomUUID(), items });
  const payment = await caller.payments.create({ orderId });
  const link = payRequestSchema.parse(Object.fromEntries(new URL(payment.payUrl, "http://x").searchParams));
  const { sig, ...request } = link;
  const openPayPage = () => openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
  if (open) await openPayPage();
  return {
    userId,
    caller,
    orderId,
    payment,
    outTradeNo: payment.outTradeNo,
    link,
    openPayPage,
    /** The shopper presses Confirm on MockPay's page. */
    confirm: () => confirmTrade(mockPay.db, mockPay.appId, payment.outTradeNo),
  };
}
