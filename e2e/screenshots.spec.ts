import { expect, test } from "@playwright/test";
import { E2E_ADMIN_TOKEN } from "./support/config";
import { placeAndPayWithDoubleClicks } from "./support/flows";
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
  await placeAndPayWithDoubleClicks(new ShopPage(page), () =>
    page.screenshot({ path: `${SHOTS}/mockpay-pay.png` }),
  );
  await expect(page.getByTestId("notification").filter({ hasText: "DUPLICATE" }).first()).toBeVisible();
  // The story has caught up with MockPay's deliveries and the consumers (recorded once a second).
  await expect(page.getByTestId("story-provider")).toContainText("1 processed", { timeout: 15_000 });
  await expect(page.getByTestId("story-consumer")).toContainText("3 applied", { timeout: 15_000 });
  await page.screenshot({ path: `${SHOTS}/order-paid.png`, fullPage: true });
  await page.getByTestId("order-story").screenshot({ path: `${SHOTS}/order-story.png` });

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
