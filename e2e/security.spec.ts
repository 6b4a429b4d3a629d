import { expect, test } from "@playwright/test";
import { database, shopperId } from "./support/db";
import { ShopPage } from "./support/shop-page";

test("MockPay's pay page cannot be framed by another page (no clickjacking of Confirm)", async ({ page }) => {
  const shop = new ShopPage(page);
  await shop.goto();
  await shop.add("Enamel mug", 1);
  await shop.placeOrderButton.click();
  await shop.expectOrderPage("$12.50");
  await page.getByRole("button", { name: "Pay", exact: true }).click();
  await expect(page).toHaveURL(/\/provider\/pay\//);
  await expect(page.getByRole("button", { name: "Confirm payment" })).toBeVisible();
  const payUrl = page.url();

  // Another site's page puts the pay page in a frame: the browser refuses to show it.
  const attacker = await page.context().newPage();
  await attacker.setContent(
    `<h1>Win a prize</h1><iframe id="victim" src="${payUrl}" width="600" height="400"></iframe>`,
  );
  await attacker.waitForTimeout(1_000);
  const frame = attacker.frames().find((f) => f !== attacker.mainFrame());
  const framed = frame ? await frame.getByRole("button", { name: "Confirm payment" }).count() : 0;
  expect(framed).toBe(0);
  // And nothing was paid.
  const outTradeNo = decodeURIComponent(new URL(payUrl).pathname.split("/").pop() ?? "");
  const [trade] = await database()<{ status: string }[]>`
    SELECT status FROM provider_trade WHERE out_trade_no = ${outTradeNo}`;
  expect(trade?.status).toBe("WAITING");
});

test("a REST token is made only when asked, works, and is refused once revoked", async ({
  page,
  request,
}) => {
  const shop = new ShopPage(page);
  await shop.goto();
  await page.getByText("REST API token").click();
  await expect(page.getByTestId("api-token")).toHaveCount(0);
  await page.getByRole("button", { name: "Show an API token" }).click();
  const token = (await page.getByTestId("api-token").textContent()) ?? "";
  expect(token).toMatch(/^ck_/);

  const order = (key: string) =>
    request.post("/api/v1/orders", {
      headers: { authorization: `Bearer ${token}`, "idempotency-key": key },
      data: { items: [{ skuId: "SKU-MUG", quantity: 1 }] },
    });
  expect((await order(`e2e-token-${Date.now()}-a`)).status()).toBe(201);

  await page.getByRole("button", { name: "Sign out everywhere else" }).click();
  await expect(page.getByRole("status").filter({ hasText: "revoked" })).toBeVisible();
  expect((await order(`e2e-token-${Date.now()}-b`)).status()).toBe(401);

  const userId = await shopperId(page.context());
  const orders = await database()<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`;
  expect(orders[0]?.n).toBe(1);
  const revoked = await database()<{ n: number }[]>`
    SELECT count(*)::int AS n FROM api_token_revocation WHERE user_id = ${userId}`;
  expect(revoked[0]?.n).toBe(1);
});
