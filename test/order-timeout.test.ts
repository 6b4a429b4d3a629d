import type { MockPayContext } from "~/mockpay/server/context";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import type { AppContext } from "~/server/app-context";
import { closeTimedOutOrders } from "~/server/orders/timeout";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, orderAwaitingPayment } from "./support/scenarios";

const _mug = [{ skuId: "SKU-MUG", quantity: 1 }];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The app with a two-second payment deadline. */
const hurried = (app: AppContext): AppContext => ({
  ...app,
  payments: { ...app.payments, paymentTimeoutS: 1 },
});

const unpaidOrder = (app: AppContext, mockPay: MockPayContext) =>
  orderAwaitingPayment(app, mockPay, { open: false });

describe("the payment deadline (ORDER_PAYMENT_TIMEOUT_S)", () => {
  test("closes an unpaid order after its deadline, with its trade at MockPay; a late Confirm pays nothing", async ({
    app,
    mockPay,
    database,
  }) => {
    const quick = hurried(app);
    const { orderId, outTradeNo, openPayPage } = await unpaidOrder(quick, mockPay);
    await openPayPage();
    // Within the deadline nothing happens.
    expect((await closeTimedOutOrders(quick.db, { payments: quick.payments })).closed).not.toContain(orderId);
    await sleep(2_300);
    const outcome = await closeTimedOutOrders(quick.db, { payments: quick.payments });
    expect(outcome.closed).toContain(orderId);
    expect((await confirmTrade(mockPay.db, mockPay.appId, outTradeNo)).status).toBe("CLOSED");
    await deliverAll(mockPay);
    const [state] = await database.sql`
      SELECT o.status AS order, p.status AS payment FROM orders o JOIN payment_order p ON p.order_id = o.id
       WHERE o.id = ${orderId}`;
    expect(state).toEqual({ order: "CLOSED", payment: "CLOSED" });
    // Running again changes nothing.
    expect((await closeTimedOutOrders(quick.db, { payments: quick.payments })).closed).not.toContain(orderId);
  });

  test("a pay link past its expiry opens no trade, and one opened before it can no longer be paid", async ({
    app,
    mockPay,
  }) => {
    const quick = hurried(app);
    const neverOpened = await unpaidOrder(quick, mockPay);
    const opened = await unpaidOrder(quick, mockPay);
    await opened.openPayPage();
    await sleep(2_300);
    const { sig, ...request } = neverOpened.link;
    await expect(openTrade(mockPay.db, request, sig, mockPay.webhookSecret)).rejects.toMatchObject({
      code: "LINK_EXPIRED",
    });
    // Confirm past the expiry closes the trade instead of paying it.
    expect((await confirmTrade(mockPay.db, mockPay.appId, opened.outTradeNo)).status).toBe("CLOSED");
    // A link cannot be stretched: a later expiry breaks the signature.
    await expect(
      openTrade(
        mockPay.db,
        { ...request, expires_at: request.expires_at + 3600 },
        sig,
        mockPay.webhookSecret,
      ),
    ).rejects.toMatchObject({ code: "INVALID_REQUEST" });
  });

  test("leaves an order paid at the last moment paid", async ({ app, mockPay, database }) => {
    const quick = hurried(app);
    const { orderId, outTradeNo, openPayPage } = await unpaidOrder(quick, mockPay);
    await openPayPage();
    await confirmTrade(mockPay.db, mockPay.appId, outTradeNo);
    await sleep(2_300);
    // The notification has not arrived yet: the close finds the trade PAID, and the order follows its payment.
    const outcome = await closeTimedOutOrders(quick.db, { payments: quick.payments });
    expect(outcome.paid).toContain(orderId);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("PAID");
  });
});
