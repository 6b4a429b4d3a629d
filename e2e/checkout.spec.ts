import { expect, test } from "@playwright/test";
import { ordersOf, shopperId } from "./support/db";
import { CREATE_ORDER, ShopPage } from "./support/shop-page";

test.describe("placing an order", () => {
  test("a double click places one order", async ({ page, context }) => {
    const shop = new ShopPage(page);
    await shop.goto();
    await shop.add("Enamel mug", 2);
    await shop.placeOrderButton.dblclick();
    await shop.expectOrderPage("$25.00");

    const orders = await ordersOf(await shopperId(context));
    expect(orders).toHaveLength(1);
    expect(Number(orders[0]?.amount_cents)).toBe(2500);
    expect(new Set(shop.requestIds()).size).toBe(1);
  });

  test("a triple click places one order", async ({ page, context }) => {
    const shop = new ShopPage(page);
    await shop.goto();
    await shop.add("Hand grinder");
    await shop.placeOrderButton.click({ clickCount: 3 });
    await shop.expectOrderPage("$89.00");
    expect(await ordersOf(await shopperId(context))).toHaveLength(1);
    expect(new Set(shop.requestIds()).size).toBe(1);
  });

  test("a response lost after the server committed is retried with the same key", async ({
    page,
    context,
  }) => {
    const shop = new ShopPage(page);
    let dropped = 0;
    await page.route(CREATE_ORDER, async (route) => {
      if (dropped === 0) {
        dropped++;
        // The server receives the request and commits the order; the answer never arrives.
        await route.fetch();
        await route.abort("connectionreset");
        return;
      }
      await route.continue();
    });
    await shop.goto();
    await shop.add("Espresso beans, 1 kg");
    await shop.placeOrderButton.click();
    await shop.expectOrderPage("$24.90");

    expect(dropped).toBe(1);
    const ids = shop.requestIds();
    expect(ids.length).toBeGreaterThanOrEqual(2);
    expect(new Set(ids).size).toBe(1);
    const orders = await ordersOf(await shopperId(context));
    expect(orders.map((o) => o.request_id)).toEqual([ids[0]]);
  });

  test("a reload while the request is in flight still ends with one order", async ({ page, context }) => {
    const shop = new ShopPage(page);
    let committed = false;
    let held = false;
    await page.route(CREATE_ORDER, async (route) => {
      if (!held) {
        held = true;
        // Let the server commit, but keep the browser waiting until it reloads.
        await route.fetch();
        committed = true;
        return;
      }
      await route.continue();
    });
    await shop.goto();
    await shop.add("Gooseneck kettle");
    await shop.placeOrderButton.click();
    await expect(shop.placeOrderButton).toHaveText("Placing order…");
    await expect.poll(() => committed).toBe(true);
    await page.reload();

    // The page finds its in-flight intent and asks again with the same key.
    await shop.expectOrderPage("$54.00");
    const ids = shop.requestIds();
    expect(new Set(ids).size).toBe(1);
    const orders = await ordersOf(await shopperId(context));
    expect(orders.map((o) => o.request_id)).toEqual([ids[0]]);
  });

  test("a second, different order afterwards gets a new key and a new order", async ({ page, context }) => {
    const shop = new ShopPage(page);
    await shop.goto();
    await shop.add("Enamel mug");
    await shop.placeOrderButton.click();
    await shop.expectOrderPage("$12.50");

    await page.getByRole("link", { name: "Continue shopping" }).click();
    await expect(page.getByRole("heading", { name: "Catalogue" })).toBeVisible();
    await shop.add("Enamel mug");
    await shop.placeOrderButton.click();
    await shop.expectOrderPage("$12.50");

    const orders = await ordersOf(await shopperId(context));
    expect(orders).toHaveLength(2);
    expect(new Set(orders.map((o) => o.request_id)).size).toBe(2);
    expect(new Set(shop.requestIds()).size).toBe(2);
  });

  test("an order the shop cannot fill is refused clearly and writes nothing", async ({ page, context }) => {
    const shop = new ShopPage(page);
    await shop.goto();
    await shop.add("Limited edition dripper", 4);
    await shop.placeOrderButton.click();
    const refusal = page.getByRole("alert").filter({ hasText: "Limited edition dripper" });
    await expect(refusal).toContainText("only 3 of Limited edition dripper left");
    await expect(refusal).toContainText("Change your cart");
    expect(await ordersOf(await shopperId(context))).toHaveLength(0);
  });
});
