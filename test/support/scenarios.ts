import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { type AdminAction, runAdminAction } from "~/mockpay/server/admin";
import type { MockPayContext } from "~/mockpay/server/context";
import { deliverDueNotifications } from "~/mockpay/server/delivery";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import type { AppContext } from "~/server/app-context";
import type { Db } from "~/server/db/client";
import { outboxEvent, sku } from "~/server/db/schema";
import { consumersOf } from "~/server/fulfilment/consumers";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { createOrder } from "~/server/orders/create-order";
import type { OrderLine } from "~/server/orders/schema";
import { createPayment } from "~/server/payments/create-payment";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { reconcile } from "~/server/reconciliation/reconcile";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { type NotificationBody, payRequestSchema, signBody } from "~/shared/provider-contract";

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
      signature: signBody("notification", app.payments.webhookSecret, body, Math.floor(Date.now() / 1000)),
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
  const { orderId } = await caller.orders.create({ requestId: randomUUID(), items });
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

/** A fact about a payment, signed with the provider's secret and handed to the merchant's notify handler. */
export function notifyAsProvider(app: AppContext, body: NotificationBody) {
  const raw = JSON.stringify(body);
  return handlePaymentNotification(
    app.db,
    {
      body: raw,
      signature: signBody("notification", app.payments.webhookSecret, raw, Math.floor(Date.now() / 1000)),
      deliveryId: randomUUID(),
    },
    app.payments,
  );
}

/** The parts of a notification that name a payment (add `type` and `transaction_id`). */
export const factAbout = (
  app: AppContext,
  payment: { outTradeNo: string; amountCents: number; currency: string },
) =>
  ({
    id: `evt_${randomUUID()}`,
    app_id: app.payments.appId,
    out_trade_no: payment.outTradeNo,
    amount_cents: payment.amountCents,
    currency: payment.currency,
    created_at: new Date().toISOString(),
  }) as const;

/**
 * Runs the consumers of every event of one order, as the worker would, until no event is new: fulfilment,
 * stock short and its automatic refund, what refunds give back.
 */
export async function consumeOrderEvents(db: Db, orderId: string) {
  const done = new Set<string>();
  for (let round = 0; round < 20; round++) {
    const events = await db
      .select({ id: outboxEvent.id, userId: outboxEvent.userId, eventType: outboxEvent.eventType })
      .from(outboxEvent)
      .where(eq(outboxEvent.aggregateId, orderId))
      .orderBy(outboxEvent.createdAt);
    const fresh = events.filter((event) => !done.has(event.id));
    if (fresh.length === 0) return;
    for (const event of fresh) {
      done.add(event.id);
      for (const consumer of consumersOf(event.eventType)) {
        await handleConsumeJob(db, { eventId: event.id, userId: event.userId, consumer: consumer.name });
      }
    }
  }
}

/** A SKU of its own with this much stock, so a test can run it out. */
export async function scarceSku(db: Db, stock: number, priceCents = 1870) {
  const id = `SKU-SCARCE-${randomUUID().slice(0, 8)}`;
  await db.insert(sku).values({ id, name: "Scarce item", priceCents, stock, initialStock: stock });
  return id;
}

/** Arms one of MockPay's per-trade faults (its admin page's actions), `count` times where it counts. */
export function mockPayFault(mockPay: MockPayContext, outTradeNo: string, action: AdminAction, count = 1) {
  return runAdminAction(
    mockPay.db,
    mockPay.appId,
    outTradeNo,
    { action, count, delayS: 1 },
    mockPay.delivery,
  );
}

/**
 * A paid order of 2 units of a SKU of its own, its events not yet consumed, and a line refund of 1 unit recorded
 * while the provider was away: REFUND_CREATED, for a send to take.
 */
export async function lineRefundToSend(app: AppContext, mockPay: MockPayContext) {
  const skuId = await scarceSku(app.db, 10);
  const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
  const refundNo = `R-${randomUUID()}`;
  const away = { ...app, payments: { ...app.payments, providerBaseUrl: "http://127.0.0.1:1" } };
  await createCaller({ app: away, userId: paid.userId, requestId: randomUUID() }).refunds.create({
    orderId: paid.orderId,
    refundNo,
    lines: [{ skuId, quantity: 1 }],
  });
  return { paid, skuId, refundNo };
}

/**
 * A paid order of 2 units of a SKU of its own whose line refund of 1 unit was under way when it shipped (recorded
 * while the provider was away), so the shipment left that unit behind, and which MockPay then rejected.
 */
export async function unitLeftBehindForRejectedRefund(app: AppContext, mockPay: MockPayContext) {
  const { paid, skuId, refundNo } = await lineRefundToSend(app, mockPay);
  await consumeOrderEvents(app.db, paid.orderId);
  await mockPayFault(mockPay, paid.outTradeNo, "REJECT_REFUNDS", 1);
  await submitPendingRefunds(app.db, app.payments);
  const [row] = await app.db.$client<{ provider_refund_no: string; status: string; shipped: number }[]>`
    SELECT r.provider_refund_no, r.status,
           (SELECT sum(quantity)::int FROM shipment_line WHERE order_id = r.order_id) AS shipped
      FROM refund_order r WHERE r.refund_no = ${refundNo}`;
  if (row?.status !== "REFUND_FAILED" || row.shipped !== 1)
    throw new Error(`unexpected story: ${JSON.stringify(row)}`);
  return { ...paid, skuId, refundNo, providerRefundNo: row.provider_refund_no };
}

/** What reconciliation finds wrong with one order, with this lag (events still to be delivered aside). */
export async function violationsOf(db: Db, orderId: string, lagSeconds = 0) {
  return (await reconcile(db, { lagSeconds })).invariants
    .filter((i) => i.name !== "events-delivered")
    .flatMap((i) =>
      i.violations
        .filter((v) => v.rows.some((row) => row.order_id === orderId))
        .map((v) => `${i.name}: ${v.message}`),
    );
}
