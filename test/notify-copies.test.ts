import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import type { Db } from "~/server/db/client";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { signBody } from "~/shared/provider-contract";
import { describe, expect, test } from "./support/fixtures";
import { notifyAsProvider, orderAwaitingPayment } from "./support/scenarios";

/** The app with its database handle counting the transactions opened through it. */
function countingTransactions(app: AppContext) {
  let opened = 0;
  const db = new Proxy(app.db, {
    get(target, property, receiver) {
      if (property === "transaction") {
        return (...args: Parameters<Db["transaction"]>) => {
          opened++;
          return target.transaction(...args);
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
  return { app: { ...app, db }, opened: () => opened };
}

/** The provider's word that the order's payment succeeded, under a new transaction id. */
function successOf(app: AppContext, order: Awaited<ReturnType<typeof orderAwaitingPayment>>) {
  return {
    id: `evt_${randomUUID()}`,
    type: "payment.succeeded",
    app_id: app.payments.appId,
    out_trade_no: order.outTradeNo,
    transaction_id: `T_${randomUUID()}`,
    amount_cents: order.payment.amountCents,
    currency: order.payment.currency,
    created_at: new Date().toISOString(),
  };
}

describe("copies of one notification arriving together at one instance", () => {
  test("10 at once: the first applies the success in a transaction, the other 9 find it applied by one statement together", async ({
    app,
    mockPay,
  }) => {
    const order = await orderAwaitingPayment(app, mockPay);
    const counted = countingTransactions(app);
    const body = successOf(app, order);
    const answers = await Promise.all(Array.from({ length: 10 }, () => notifyAsProvider(counted.app, body)));
    expect(answers.map((a) => a.httpStatus)).toEqual(Array(10).fill(200));
    expect(counted.opened()).toBe(1);
    const outcomes = await app.db.$client<{ outcome: string; n: number }[]>`
      SELECT outcome, count(*)::int AS n FROM payment_notification WHERE out_trade_no = ${order.outTradeNo}
       GROUP BY outcome ORDER BY outcome`;
    expect(outcomes).toEqual([
      { outcome: "DUPLICATE", n: 9 },
      { outcome: "PROCESSED", n: 1 },
    ]);
    // The nine that waited were recorded by one statement (one transaction time), one row per delivery.
    const [duplicates] = await app.db.$client<{ statements: number; deliveries: number }[]>`
      SELECT count(DISTINCT received_at)::int AS statements, count(DISTINCT delivery_id)::int AS deliveries
        FROM payment_notification WHERE out_trade_no = ${order.outTradeNo} AND outcome = 'DUPLICATE'`;
    expect(duplicates).toEqual({ statements: 1, deliveries: 9 });
    const [paid] = await app.db.$client<{ status: string; events: number }[]>`
      SELECT p.status, (SELECT count(*)::int FROM outbox_event e
                         WHERE e.aggregate_id = p.order_id::text AND e.event_type = 'OrderPaid') AS events
        FROM payment_order p WHERE p.out_trade_no = ${order.outTradeNo}`;
    expect(paid).toEqual({ status: "SUCCESS", events: 1 });
  });

  test("copies without a delivery id, and a copy of another fact, are recorded as themselves", async ({
    app,
    mockPay,
  }) => {
    const [order, other] = await Promise.all([
      orderAwaitingPayment(app, mockPay),
      orderAwaitingPayment(app, mockPay),
    ]);
    const body = successOf(app, order);
    const send = (fact: ReturnType<typeof successOf>, deliveryId: string | null) => {
      const raw = JSON.stringify(fact);
      return handlePaymentNotification(
        app.db,
        {
          body: raw,
          signature: signBody("notification", app.payments.webhookSecret, raw, Math.floor(Date.now() / 1000)),
          deliveryId,
        },
        app.payments,
      );
    };
    const answers = await Promise.all([
      ...Array.from({ length: 4 }, () => send(body, null)),
      send({ ...body, id: "evt_other_copy" }, "delivery-named"),
      send(successOf(app, other), null),
    ]);
    expect(answers.map((a) => a.httpStatus)).toEqual(Array(6).fill(200));
    const rows = await app.db.$client<
      { out_trade_no: string; outcome: string; delivery_id: string | null; notification_id: string }[]
    >`
      SELECT out_trade_no, outcome, delivery_id, notification_id FROM payment_notification
       WHERE out_trade_no IN (${order.outTradeNo}, ${other.outTradeNo}) ORDER BY id`;
    const mine = rows.filter((r) => r.out_trade_no === order.outTradeNo);
    expect(mine.map((r) => r.outcome).sort()).toEqual([
      "DUPLICATE",
      "DUPLICATE",
      "DUPLICATE",
      "DUPLICATE",
      "PROCESSED",
    ]);
    expect(mine.filter((r) => r.delivery_id === null)).toHaveLength(4);
    expect(mine.filter((r) => r.delivery_id === "delivery-named").map((r) => r.notification_id)).toEqual([
      "evt_other_copy",
    ]);
    expect(rows.filter((r) => r.out_trade_no === other.outTradeNo).map((r) => r.outcome)).toEqual([
      "PROCESSED",
    ]);
  });

  test("copies of different facts do not wait on each other: each takes its own transaction", async ({
    app,
    mockPay,
  }) => {
    const orders = await Promise.all(Array.from({ length: 5 }, () => orderAwaitingPayment(app, mockPay)));
    const counted = countingTransactions(app);
    await Promise.all(orders.map((order) => notifyAsProvider(counted.app, successOf(app, order))));
    expect(counted.opened()).toBe(5);
  });
});
