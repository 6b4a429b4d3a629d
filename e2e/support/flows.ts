import { expect } from "@playwright/test";
import type { ShopPage } from "./shop-page";

/** Two mugs, ordered and paid on MockPay's page; back on the order page once it shows paid. */
export async function placeAndPay(shop: ShopPage) {
  await shop.goto();
  await shop.add("Enamel mug", 2);
  await shop.placeOrderButton.click();
  await shop.expectOrderPage("$25.00");
  const orderUrl = shop.page.url();
  // A double click on "Pay" still opens one payment.
  await shop.page.getByRole("button", { name: "Pay", exact: true }).dblclick();
  await expect(shop.page).toHaveURL(/\/provider\/pay\//);
  await expect(shop.page.getByRole("heading", { name: "Pay $25.00" })).toBeVisible();
  await shop.page.getByRole("button", { name: "Confirm payment" }).click();
  await expect(shop.page).toHaveURL(orderUrl);
  // Paid, and soon shipped by the event worker.
  await expect(shop.page.getByTestId("order-status")).toHaveText(/^(PAID|SHIPPED)$/, { timeout: 20_000 });
}
