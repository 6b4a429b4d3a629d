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

/**
 * Two mugs, both buttons double-clicked: "Place order", then "Pay" and MockPay's "Confirm payment"; back on
 * the order page once it has shipped. Returns the order page's URL.
 */
export async function placeAndPayWithDoubleClicks(
  shop: ShopPage,
  atMockPay: () => Promise<unknown> = async () => {},
): Promise<string> {
  const { page } = shop;
  await shop.goto();
  await shop.add("Enamel mug", 2);
  await shop.placeOrderButton.dblclick();
  await shop.expectOrderPage("$25.00");
  const orderUrl = page.url();
  await page.getByRole("button", { name: "Pay", exact: true }).dblclick();
  await expect(page.getByRole("heading", { name: "Pay $25.00" })).toBeVisible();
  await atMockPay();
  await page.getByRole("button", { name: "Confirm payment" }).dblclick();
  await expect(page).toHaveURL(orderUrl);
  await expect(page.getByTestId("order-status")).toHaveText("SHIPPED", { timeout: 20_000 });
  return orderUrl;
}
