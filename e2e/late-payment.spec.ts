import { expect, test } from "@playwright/test";
import { database, ordersOf, shopperId } from "./support/db";
import { ShopPage } from "./support/shop-page";

/** The payment timeout the app runs with (ORDER_PAYMENT_TIMEOUT_S, its default). */
const PAYMENT_TIMEOUT_S = 900;

test("Confirm on a pay page left open past the order's timeout shows the link expired and takes no money", async ({
  page,
  context,
}) => {
  const shop = new ShopPage(page);
  await shop.goto();
  await shop.add("Enamel mug");
  await shop.placeOrderButton.click();
  await shop.expectOrderPage("$12.50");
  const [placed] = await ordersOf(await shopperId(context));
  const orderId = placed?.id ?? "";

  // MockPay's page opens the trade, and the shopper walks away from it.
  await page.getByRole("button", { name: "Pay", exact: true }).click();
  await expect(page).toHaveURL(/\/provider\/pay\//);
  await expect(page.getByRole("button", { name: "Confirm payment" })).toBeVisible();

  // The clock moves on past the order's payment timeout: every time this order's life recorded,
  // on both sides, is moved back by the timeout (15 minutes are not waited for in a test).
  const sql = database();
  const shift = `${PAYMENT_TIMEOUT_S + 1} seconds`;
  await sql.begin(async (tx) => {
    await tx`UPDATE orders SET created_at = created_at - ${shift}::interval WHERE id = ${orderId}`;
    await tx`UPDATE payment_order SET created_at = created_at - ${shift}::interval WHERE order_id = ${orderId}`;
    await tx`
      UPDATE provider_trade SET created_at = created_at - ${shift}::interval, expires_at = expires_at - ${shift}::interval
       WHERE out_trade_no IN (SELECT out_trade_no FROM payment_order WHERE order_id = ${orderId})`;
  });
  // The app's timeout job closes the order, its payment first at MockPay.
  await expect
    .poll(async () => (await sql`SELECT status FROM orders WHERE id = ${orderId}`)[0]?.status, {
      timeout: 30_000,
    })
    .toBe("CLOSED");

  // The shopper comes back to the page still open and presses Confirm: MockPay says why nothing happened.
  await page.getByRole("button", { name: "Confirm payment" }).click();
  await expect(page.getByTestId("trade-status")).toHaveText("CLOSED");
  await expect(page.getByTestId("trade-closed-reason")).toContainText("This payment link has expired");
  await expect(page.getByRole("button", { name: "Confirm payment" })).toHaveCount(0);

  const [facts] = await sql`
    SELECT o.status AS order,
           (SELECT string_agg(status, ',') FROM payment_order WHERE order_id = o.id) AS payments,
           (SELECT string_agg(t.status || ':' || coalesce(t.transaction_id, '-'), ',')
              FROM provider_trade t JOIN payment_order p ON p.out_trade_no = t.out_trade_no
             WHERE p.order_id = o.id) AS trades,
           (SELECT count(*)::int FROM refund_order WHERE order_id = o.id) AS refunds,
           (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = o.id) AS deductions
      FROM orders o WHERE o.id = ${orderId}`;
  expect(facts).toEqual({
    order: "CLOSED",
    payments: "CLOSED",
    trades: "CLOSED:-",
    refunds: 0,
    deductions: 0,
  });

  await page.getByRole("link", { name: "Back to the shop" }).click();
  await expect(page).toHaveURL(new RegExp(`/orders/${orderId}$`));
  await expect(page.getByTestId("order-status")).toHaveText("CLOSED");
  await expect(page.getByRole("button", { name: "Pay", exact: true })).toHaveCount(0);
});
