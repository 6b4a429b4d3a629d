import { expect, test } from "@playwright/test";
import { database, ordersOf, shopperId } from "./support/db";
import { ShopPage } from "./support/shop-page";

test("pay on the provider page and see the order paid, while the provider sends duplicates", async ({
  page,
  context,
}) => {
  const shop = new ShopPage(page);
  await shop.goto();
  await shop.add("Enamel mug", 2);
  await shop.placeOrderButton.click();
  await shop.expectOrderPage("$25.00");

  // A double click on "Pay" still opens one payment.
  await page.getByRole("button", { name: "Pay" }).dblclick();
  await expect(page).toHaveURL(/\/provider\/pay\//);
  await expect(page.getByRole("heading", { name: "Pay $25.00" })).toBeVisible();
  await page.getByRole("button", { name: "Confirm payment" }).click();

  await expect(page).toHaveURL(/\/orders\/[0-9a-f-]{36}$/);
  await expect(page.getByTestId("order-status")).toHaveText("PAID", { timeout: 20_000 });

  const [order] = await ordersOf(await shopperId(context));
  const sql = database();
  // The provider sends two at once and one more after success: wait for all three to be received.
  await expect
    .poll(
      async () =>
        (
          await sql`SELECT count(*)::int AS n FROM payment_notification n JOIN payment_order p
                     ON p.out_trade_no = n.out_trade_no WHERE p.order_id = ${order?.id ?? ""}`
        )[0]?.n,
      { timeout: 20_000 },
    )
    .toBeGreaterThanOrEqual(3);
  const [facts] = await sql`
    SELECT (SELECT count(*)::int FROM payment_order WHERE order_id = ${order?.id ?? ""}) AS payments,
           (SELECT count(*)::int FROM payment_order WHERE order_id = ${order?.id ?? ""} AND status = 'SUCCESS') AS successes,
           (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${order?.id ?? ""}) AS events`;
  expect(facts).toEqual({ payments: 1, successes: 1, events: 1 });
  await expect(page.getByTestId("notification").filter({ hasText: "DUPLICATE" }).first()).toBeVisible();
});
