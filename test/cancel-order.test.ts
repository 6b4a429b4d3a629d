import { randomUUID } from "node:crypto";
import { confirmTrade } from "~/mockpay/server/trades";
import type { AppContext } from "~/server/app-context";
import { createCaller } from "~/server/trpc/root";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, orderAwaitingPayment } from "./support/scenarios";

const _mug = [{ skuId: "SKU-MUG", quantity: 1 }];
const callerFor = (app: AppContext, userId: string) => createCaller({ app, userId, requestId: randomUUID() });

async function statesOf(database: { sql: import("postgres").Sql }, orderId: string, outTradeNo: string) {
  const [row] = await database.sql<{ order: string; payment: string; trade: string }[]>`
    SELECT o.status AS order, p.status AS payment, t.status AS trade
      FROM orders o JOIN payment_order p ON p.order_id = o.id
      JOIN provider_trade t ON t.out_trade_no = p.out_trade_no
     WHERE o.id = ${orderId} AND p.out_trade_no = ${outTradeNo}`;
  return row;
}

describe("orders.cancel", () => {
  test("closes an unpaid order and its trade at MockPay once; again is a replayed success", async ({
    app,
    mockPay,
    database,
  }) => {
    const { caller, orderId, outTradeNo } = await orderAwaitingPayment(app, mockPay);
    const first = await caller.orders.cancel({ orderId });
    const again = await caller.orders.cancel({ orderId });
    expect(first).toMatchObject({ orderId, status: "CLOSED", replayed: false });
    expect(again).toMatchObject({ orderId, status: "CLOSED", replayed: true });
    expect(await statesOf(database, orderId, outTradeNo)).toEqual({
      order: "CLOSED",
      payment: "CLOSED",
      trade: "CLOSED",
    });
    // The pay link can no longer be paid.
    expect((await confirmTrade(mockPay.db, mockPay.appId, outTradeNo)).status).toBe("CLOSED");
    // And the closed order cannot be paid again.
    await expect(caller.payments.create({ orderId })).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
  });

  test("closes a trade nobody opened yet: its pay link opens as closed and cannot be paid", async ({
    app,
    mockPay,
    database,
  }) => {
    const { caller, orderId, outTradeNo, openPayPage } = await orderAwaitingPayment(app, mockPay, {
      open: false,
    });
    await caller.orders.cancel({ orderId });
    expect((await openPayPage()).status).toBe("CLOSED");
    expect((await confirmTrade(mockPay.db, mockPay.appId, outTradeNo)).status).toBe("CLOSED");
    expect((await statesOf(database, orderId, outTradeNo))?.order).toBe("CLOSED");
  });

  test("refuses a paid order with ORDER_NOT_CANCELLABLE (412), changing nothing", async ({
    app,
    mockPay,
    database,
  }) => {
    const { caller, orderId, outTradeNo } = await orderAwaitingPayment(app, mockPay);
    await confirmTrade(mockPay.db, mockPay.appId, outTradeNo);
    await deliverAll(mockPay);
    const refused = await caller.orders.cancel({ orderId }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: "PRECONDITION_FAILED" });
    expect((refused as { cause?: { code?: string } }).cause?.code).toBe("ORDER_NOT_CANCELLABLE");
    expect(await statesOf(database, orderId, outTradeNo)).toEqual({
      order: "PAID",
      payment: "SUCCESS",
      trade: "PAID",
    });
  });

  test("keeps other shoppers out: their cancel is ORDER_NOT_FOUND and closes nothing", async ({
    app,
    mockPay,
    database,
  }) => {
    const { orderId, outTradeNo } = await orderAwaitingPayment(app, mockPay);
    await expect(callerFor(app, randomUUID()).orders.cancel({ orderId })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    expect(await statesOf(database, orderId, outTradeNo)).toEqual({
      order: "PENDING_PAYMENT",
      payment: "PENDING",
      trade: "WAITING",
    });
  });

  test("answers 503 and keeps the order when MockPay cannot be reached; the retry closes it", async ({
    app,
    mockPay,
    database,
  }) => {
    const { userId, orderId, outTradeNo } = await orderAwaitingPayment(app, mockPay);
    const away = { ...app, payments: { ...app.payments, providerBaseUrl: "http://127.0.0.1:9" } };
    await expect(callerFor(away, userId).orders.cancel({ orderId })).rejects.toMatchObject({
      code: "SERVICE_UNAVAILABLE",
    });
    expect((await statesOf(database, orderId, outTradeNo))?.order).toBe("PENDING_PAYMENT");
    expect(await callerFor(app, userId).orders.cancel({ orderId })).toMatchObject({ status: "CLOSED" });
  });

  test("cancel racing Confirm, 20 orders: each ends paid and open, or closed with no money taken", async ({
    app,
    mockPay,
    database,
  }) => {
    const orders = await Promise.all(Array.from({ length: 20 }, () => orderAwaitingPayment(app, mockPay)));
    const outcomes = await Promise.all(
      orders.map(async ({ caller, orderId, outTradeNo }) => {
        const [cancelled] = await Promise.allSettled([
          caller.orders.cancel({ orderId }),
          confirmTrade(mockPay.db, mockPay.appId, outTradeNo),
        ]);
        return cancelled;
      }),
    );
    await deliverAll(mockPay);
    const worlds = { paid: 0, closed: 0 };
    for (const [i, { orderId, outTradeNo }] of orders.entries()) {
      const state = await statesOf(database, orderId, outTradeNo);
      const cancelled = outcomes[i];
      if (state?.trade === "PAID") {
        worlds.paid++;
        expect(state).toEqual({ order: "PAID", payment: "SUCCESS", trade: "PAID" });
        expect(cancelled?.status).toBe("rejected");
      } else {
        worlds.closed++;
        expect(state).toEqual({ order: "CLOSED", payment: "CLOSED", trade: "CLOSED" });
        expect(cancelled?.status).toBe("fulfilled");
      }
    }
    expect(worlds.paid + worlds.closed).toBe(20);
  });
});
