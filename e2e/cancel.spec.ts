import { expect, test } from "@playwright/test";
import { database, ordersOf, shopperId } from "./support/db";
import { ShopPage } from "./support/shop-page";

test("double-clicking Cancel closes the order once, and its payment at MockPay can no longer be paid", async ({
  page,
  context,
}) => {
  const shop = new ShopPage(page);
  await shop.goto();
  await shop.add("Enamel mug", 2);
  await shop.placeOrderButton.click();
  await shop.expectOrderPage("$25.00");
  const orderUrl = page.url();
  // Open MockPay's page (the trade exists there), then come back without paying.
  await page.getByRole("button", { name: "Pay", exact: true }).click();
  await expect(page).toHaveURL(/\/provider\/pay\//);
  const payUrl = page.url();
  await expect(page.getByRole("heading", { name: "Pay $25.00" })).toBeVisible();
  await page.goto(orderUrl);

  const cancelCalls: string[] = [];
  page.on("request", (request) => {
    if (request.url().includes("orders.cancel")) cancelCalls.push(request.url());
  });
  await page.getByRole("button", { name: "Cancel order" }).dblclick();
  await expect(page.getByTestId("order-status")).toHaveText("CLOSED");

  const [order] = await ordersOf(await shopperId(context));
  expect(order?.status).toBe("CLOSED");
  const [facts] = await database()`
    SELECT (SELECT count(*)::int FROM payment_order WHERE order_id = ${order?.id ?? ""} AND status = 'CLOSED') AS closed,
           (SELECT count(*)::int FROM payment_order WHERE order_id = ${order?.id ?? ""} AND status <> 'CLOSED') AS open,
           (SELECT count(*)::int FROM provider_trade t JOIN payment_order p ON p.out_trade_no = t.out_trade_no
             WHERE p.order_id = ${order?.id ?? ""} AND t.status = 'CLOSED') AS closed_at_mockpay`;
  expect(facts).toEqual({ closed: 1, open: 0, closed_at_mockpay: 1 });
  // The ref guard sends one call for a double click.
  expect(cancelCalls.length).toBe(1);

  // The pay link now shows a closed trade: nothing to confirm.
  await page.goto(payUrl);
  await expect(page.getByTestId("trade-status")).toHaveText("CLOSED");
  await expect(page.getByRole("button", { name: "Confirm payment" })).toHaveCount(0);
});
