import { expect, test } from "@playwright/test";
import { E2E_ADMIN_TOKEN } from "./support/config";
import { ShopPage } from "./support/shop-page";

/**
 * The pictures in the README and docs/, taken from the running app on every end-to-end run so they show
 * what the code does today. Commit docs/screenshots/ after a run that changed them.
 */
const SHOTS = "docs/screenshots";

test("the screenshots in the README: an order paid with a double click, MockPay's page, /admin, and the shop at 390 px", async ({
  page,
  browser,
}) => {
  await page.setViewportSize({ width: 1100, height: 800 });
  const shop = new ShopPage(page);
  await shop.goto();
  await shop.add("Enamel mug", 2);
  await shop.placeOrderButton.dblclick();
  await shop.expectOrderPage("$25.00");
  const orderUrl = page.url();
  await page.getByRole("button", { name: "Pay", exact: true }).dblclick();
  await expect(page.getByRole("heading", { name: "Pay $25.00" })).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/mockpay-pay.png` });
  await page.getByRole("button", { name: "Confirm payment" }).dblclick();
  await expect(page).toHaveURL(orderUrl);
  await expect(page.getByTestId("order-status")).toHaveText("SHIPPED", { timeout: 20_000 });
  await expect(page.getByTestId("notification").filter({ hasText: "DUPLICATE" }).first()).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/order-paid.png`, fullPage: true });

  await page.goto(`/admin?token=${E2E_ADMIN_TOKEN}`);
  await expect(page.getByRole("heading", { name: "Operations" })).toBeVisible();
  await expect(page.getByTestId("chart").first()).toBeVisible();
  await page.screenshot({ path: `${SHOTS}/admin.png` });

  const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
  try {
    await new ShopPage(phone).goto();
    await phone.screenshot({ path: `${SHOTS}/shop-390.png` });
  } finally {
    await phone.close();
  }
});
