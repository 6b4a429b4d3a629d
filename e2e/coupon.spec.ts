import { expect, test } from "@playwright/test";
import { database, shopperId } from "./support/db";
import { placeAndPay } from "./support/flows";
import { ShopPage } from "./support/shop-page";

test("one coupon chosen in two tabs at once makes one discounted order; the other tab is told why", async ({
  page,
  context,
}) => {
  await placeAndPay(new ShopPage(page));
  const userId = await shopperId(context);
  // The benefits consumer grants the coupon once the order is paid.
  await expect
    .poll(
      async () =>
        (
          await database()<{ code: string }[]>`
            SELECT code FROM benefit_grant WHERE user_id = ${userId} AND benefit_type = 'COUPON'`
        )[0]?.code,
      { timeout: 20_000 },
    )
    .toMatch(/^THANKS-/);

  // Two tabs of the same shopper, the same coupon chosen in each (each tab its own cart and checkout key).
  const tabs = [new ShopPage(page), new ShopPage(await context.newPage())];
  for (const tab of tabs) {
    await tab.goto();
    await tab.add("Enamel mug", 2);
    const coupon = tab.page.getByRole("combobox", { name: "Coupon" });
    await expect(coupon.locator("option")).toHaveCount(2);
    await coupon.selectOption({ index: 1 });
    await expect(tab.page.getByTestId("cart-total")).toHaveText("$20.00");
  }
  await Promise.all(tabs.map((tab) => tab.placeOrderButton.click()));

  // Exactly one tab lands on its discounted order; the other says the coupon is taken.
  await expect
    .poll(async () => {
      const urls = tabs.map((tab) => tab.page.url());
      return urls.filter((url) => /\/orders\/[0-9a-f-]{36}$/.test(url)).length;
    })
    .toBe(1);
  const [winner, loser] = /\/orders\//.test(tabs[0]?.page.url() ?? "") ? tabs : [...tabs].reverse();
  if (!winner || !loser) throw new Error("two tabs");
  await expect(loser.page.getByRole("alert").filter({ hasText: "coupon" })).toContainText("already used");
  await expect(winner.page.getByTestId("order-discount")).toContainText("$5.00 off");

  const rows = await database()<{ amount_cents: string; discount_cents: number }[]>`
    SELECT amount_cents, discount_cents FROM orders
     WHERE user_id = ${userId} AND status = 'PENDING_PAYMENT' ORDER BY created_at`;
  expect(rows.map((r) => [Number(r.amount_cents), r.discount_cents])).toEqual([[2000, 500]]);
  const [redemptions] = await database()`
    SELECT count(*)::int AS n FROM coupon_redemption r JOIN benefit_grant g ON g.code = r.code
     WHERE g.user_id = ${userId} AND r.status = 'ACTIVE'`;
  expect(redemptions?.n).toBe(1);
});
