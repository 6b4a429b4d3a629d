import AxeBuilder from "@axe-core/playwright";
import { expect, type Page, test } from "@playwright/test";
import { E2E_ADMIN_TOKEN } from "./support/config";
import { ordersOf, shopperId } from "./support/db";
import { ShopPage } from "./support/shop-page";

/** Everything the browser complains about on a page: console errors and uncaught exceptions. */
function watchConsole(page: Page): string[] {
  const complaints: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") complaints.push(`${page.url()}: ${message.text()}`);
  });
  page.on("pageerror", (error) => complaints.push(`${page.url()}: ${error.message}`));
  return complaints;
}

/** axe-core's serious and critical findings on the page as it is now (WCAG 2.1 A and AA rules). */
async function seriousViolations(page: Page) {
  const results = await new AxeBuilder({ page })
    .withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"])
    .analyze();
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
}

test.describe("what a person sees", () => {
  test("a shopper's whole trip logs no browser error, and every page passes axe", async ({
    page,
    context,
  }) => {
    const complaints = watchConsole(page);
    const shop = new ShopPage(page);
    await shop.goto();
    expect(await seriousViolations(page)).toEqual([]);

    await shop.add("Enamel mug", 2);
    await shop.placeOrderButton.click();
    await shop.expectOrderPage("$25.00");
    expect(await seriousViolations(page)).toEqual([]);
    const orderUrl = page.url();

    await page.getByRole("button", { name: "Pay", exact: true }).click();
    await expect(page).toHaveURL(/\/provider\/pay\//);
    await expect(page.getByRole("heading", { name: "Pay $25.00" })).toBeVisible();
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("button", { name: "Confirm payment" }).click();
    await expect(page).toHaveURL(orderUrl);
    await expect(page.getByTestId("order-status")).toHaveText(/^(PAID|SHIPPED)$/, { timeout: 20_000 });
    expect(await seriousViolations(page)).toEqual([]);

    // The header's staff links are not prefetched for shoppers (they would answer 401 in the console).
    expect(complaints).toEqual([]);
    const [order] = await ordersOf(await shopperId(context));
    expect(order?.status).toMatch(/^(PAID|SHIPPED)$/);
  });

  test("the staff pages pass axe too", async ({ page }) => {
    await page.goto(`/admin?token=${E2E_ADMIN_TOKEN}`);
    await expect(page.getByRole("heading", { name: "Operations" })).toBeVisible();
    expect(await seriousViolations(page)).toEqual([]);
    // Checked once no delivery is running: while one is, the page reloads itself every 2 s (a meta refresh, which
    // axe rightly flags), and whether one is running depends on what the tests before this one paid.
    await expect(async () => {
      await page.goto(`/provider/admin?token=${E2E_ADMIN_TOKEN}`);
      await expect(page.getByText("Deliveries in progress")).toHaveCount(0, { timeout: 500 });
    }).toPass({ timeout: 30_000 });
    await expect(page.getByRole("banner")).toContainText("MockPay");
    expect(await seriousViolations(page)).toEqual([]);
  });

  test("MockPay looks like another site: its own header, colours and icon, and none of the shop's navigation", async ({
    page,
  }) => {
    const shop = new ShopPage(page);
    await shop.goto();
    const shopBackground = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const shopIcon = await page.locator('link[rel="icon"]').first().getAttribute("href");
    await expect(page.getByRole("navigation", { name: "Site" })).toBeVisible();

    await shop.add("Enamel mug");
    await shop.placeOrderButton.click();
    await shop.expectOrderPage("$12.50");
    await page.getByRole("button", { name: "Pay", exact: true }).click();
    await expect(page).toHaveURL(/\/provider\/pay\//);

    await expect(page.getByRole("banner")).toContainText("MockPay");
    await expect(page.getByRole("navigation", { name: "Site" })).toHaveCount(0);
    await expect(page.getByRole("link", { name: "Operations" })).toHaveCount(0);
    expect(await page.title()).toMatch(/MockPay/);
    expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).not.toBe(
      shopBackground,
    );
    const icon = await page.locator('link[rel="icon"]').first().getAttribute("href");
    expect(icon).toBeTruthy();
    expect(icon).not.toBe(shopIcon);
  });

  test("the shop works at 390 px wide: nothing overflows, an order can be placed", async ({
    browser,
  }, testInfo) => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 });
    const page = await context.newPage();
    try {
      const shop = new ShopPage(page);
      await shop.goto();
      const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(await overflow()).toBeLessThanOrEqual(0);
      await page.screenshot({ path: testInfo.outputPath("shop-390.png"), fullPage: true });

      await shop.add("Enamel mug");
      await shop.placeOrderButton.scrollIntoViewIfNeeded();
      const button = await shop.placeOrderButton.boundingBox();
      expect(button && button.x >= 0 && button.x + button.width <= 390).toBe(true);
      await shop.placeOrderButton.click();
      await shop.expectOrderPage("$12.50");
      expect(await overflow()).toBeLessThanOrEqual(0);
      await page.screenshot({ path: testInfo.outputPath("order-390.png"), fullPage: true });
      expect(await ordersOf(await shopperId(context))).toHaveLength(1);
    } finally {
      await context.close();
    }
  });
});
