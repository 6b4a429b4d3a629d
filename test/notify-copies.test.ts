import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import type { Db } from "~/server/db/client";
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
  test("10 at once: the first applies the success in a transaction, the other 9 find it applied by one statement each", async ({
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
    const [paid] = await app.db.$client<{ status: string; events: number }[]>`
      SELECT p.status, (SELECT count(*)::int FROM outbox_event e
                         WHERE e.aggregate_id = p.order_id::text AND e.event_type = 'OrderPaid') AS events
        FROM payment_order p WHERE p.out_trade_no = ${order.outTradeNo}`;
    expect(paid).toEqual({ status: "SUCCESS", events: 1 });
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
