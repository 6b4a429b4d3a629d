import { expect, test } from "@playwright/test";
import { E2E_ADMIN_TOKEN } from "./support/config";
import { database, ordersOf, shopperId } from "./support/db";
import { placeAndPay } from "./support/flows";
import { ShopPage } from "./support/shop-page";

test("pay, wait for fulfilment, refund, and the books still balance", async ({ page, context }) => {
  const shop = new ShopPage(page);
  await placeAndPay(shop);
  await expect(page.getByTestId("order-status")).toHaveText("SHIPPED", { timeout: 20_000 });
  const [order] = await ordersOf(await shopperId(context));
  const orderId = order?.id ?? "";

  // A double click on the refund button still makes one refund.
  await page.getByRole("button", { name: "Request refund" }).dblclick();
  await expect(page.getByTestId("refund-status")).toHaveText("REFUND_SUCCESS", { timeout: 20_000 });
  await expect
    .poll(async () => (await database()`SELECT status FROM orders WHERE id = ${orderId}`)[0]?.status, {
      timeout: 20_000,
    })
    .toBe("REFUNDED");
  await expect(page.getByTestId("order-status")).toHaveText("REFUNDED", { timeout: 20_000 });
  // Where the money is, from the ledger, in words.
  await expect(page.getByTestId("order-money")).toHaveText("Paid $25.00; all of it back with you.", {
    timeout: 20_000,
  });

  const sql = database();
  // The worker consumes RefundSucceeded: benefits are reversed, once; the mugs shipped and stay with the shopper
  // (money alone brings no goods back: a return does).
  await expect
    .poll(
      async () =>
        (
          await sql`
            SELECT (SELECT count(*)::int FROM stock_return_record WHERE order_id = ${orderId}) AS returns,
                   (SELECT count(*)::int FROM benefit_reversal WHERE order_id = ${orderId}) AS reversals`
        )[0],
      { timeout: 20_000 },
    )
    .toEqual({ returns: 0, reversals: 2 });
  const refunds = await sql`SELECT status, amount_cents FROM refund_order WHERE order_id = ${orderId}`;
  expect(refunds.map((r) => [r.status, Number(r.amount_cents)])).toEqual([["REFUND_SUCCESS", 2500]]);

  // The operator's order page: the ledger's three transfers, and every balance back to zero.
  await page.goto(`/admin/orders/${orderId}?token=${E2E_ADMIN_TOKEN}`);
  await expect(page.getByTestId("ledger-transfer")).toHaveCount(3);
  await expect(page.getByTestId("ledger-payment")).toContainText("$0.00");
  const transfers =
    await sql`SELECT from_account, to_account, amount_cents FROM ledger_transfer WHERE order_id = ${orderId} ORDER BY id`;
  expect(transfers.map((t) => [t.from_account, t.to_account, Number(t.amount_cents)])).toEqual([
    ["shopper", "revenue", 2500],
    ["revenue", "refunds_payable", 2500],
    ["refunds_payable", "shopper", 2500],
  ]);

  // The page shows the last run the event worker kept; "Reconcile now" queues a full one, which it takes.
  await page.goto(`/admin?token=${E2E_ADMIN_TOKEN}`);
  const asked = () =>
    sql`SELECT ok FROM reconciliation_report WHERE kind = 'requested' AND checked_at IS NOT NULL`;
  expect(await asked()).toEqual([]);
  await page.getByRole("button", { name: "Reconcile now" }).click();
  await expect.poll(async () => (await asked()).map((r) => r.ok), { timeout: 30_000 }).toEqual([true]);
  await page.reload();
  await expect(page.getByTestId("reconciliation-status")).toContainText("No violation");
});

test("double-clicking 'Return one' asks one return; once the operator has the mug back, its price is refunded, one unit of stock, points cut", async ({
  page,
  context,
}) => {
  const shop = new ShopPage(page);
  await placeAndPay(shop);
  await expect(page.getByTestId("order-status")).toHaveText("SHIPPED", { timeout: 20_000 });
  const [order] = await ordersOf(await shopperId(context));
  const orderId = order?.id ?? "";
  const sql = database();

  await page.getByRole("button", { name: "Return one Enamel mug" }).dblclick();
  // Shipped already: a return, waiting for the mug to come back; nothing moves until then.
  await expect(page.getByTestId("refund-status")).toHaveText("REFUND_AWAITING_GOODS", { timeout: 20_000 });
  const waiting = await sql`SELECT count(*)::int AS n FROM refund_order WHERE order_id = ${orderId}`;
  expect(waiting[0]?.n).toBe(1);
  const orderPage = page.url();
  await page.goto(`/admin?token=${E2E_ADMIN_TOKEN}`);
  await page.getByTestId("awaiting-return").getByRole("button", { name: "Received" }).click();
  await expect(page.getByRole("status").filter({ hasText: "received" })).toBeVisible();
  await page.goto(orderPage);
  await expect(page.getByTestId("refund-status")).toHaveText("REFUND_SUCCESS", { timeout: 20_000 });
  await expect(page.getByTestId("refund")).toContainText("gives back 1 × SKU-MUG");
  // Half the order back: still SHIPPED, one mug returned to stock, points for the 12.50 kept.
  await expect
    .poll(
      async () =>
        (
          await sql`
            SELECT (SELECT status FROM orders WHERE id = ${orderId}) AS status,
                   (SELECT coalesce(sum(quantity), 0)::int FROM stock_return_record WHERE order_id = ${orderId}) AS returned,
                   (SELECT amount FROM benefit_grant WHERE order_id = ${orderId} AND benefit_type = 'LOYALTY_POINTS')
                   - (SELECT coalesce(sum(amount), 0)::int FROM benefit_reversal
                       WHERE order_id = ${orderId} AND benefit_type = 'LOYALTY_POINTS') AS points`
        )[0],
      { timeout: 20_000 },
    )
    .toEqual({ status: "SHIPPED", returned: 1, points: 12 });
  const refunds = await sql`SELECT amount_cents FROM refund_order WHERE order_id = ${orderId}`;
  expect(refunds.map((r) => Number(r.amount_cents))).toEqual([1250]);
});
