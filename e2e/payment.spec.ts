import { expect, test } from "@playwright/test";
import { E2E_ADMIN_TOKEN } from "./support/config";
import { database, ordersOf, shopperId } from "./support/db";
import { placeAndPay } from "./support/flows";
import { ShopPage } from "./support/shop-page";

async function paymentFacts(orderId: string) {
  const [facts] = await database()`
    SELECT (SELECT count(*)::int FROM payment_order WHERE order_id = ${orderId}) AS payments,
           (SELECT count(*)::int FROM payment_order WHERE order_id = ${orderId} AND status = 'SUCCESS') AS successes,
           (SELECT count(*)::int FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = 'OrderPaid') AS events`;
  return facts;
}

test("pay on the provider page and see the order paid, while the provider sends duplicates", async ({
  page,
  context,
}) => {
  const shop = new ShopPage(page);
  await placeAndPay(shop);

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
  expect(await paymentFacts(order?.id ?? "")).toEqual({ payments: 1, successes: 1, events: 1 });
  await expect(page.getByTestId("notification").filter({ hasText: "DUPLICATE" }).first()).toBeVisible();
  // Fulfilment: the worker consumes OrderPaid once per consumer and ships.
  await expect(page.getByTestId("order-status")).toHaveText("SHIPPED", { timeout: 20_000 });
  const [effects] = await sql`
    SELECT (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ${order?.id ?? ""}) AS deductions,
           (SELECT count(*)::int FROM benefit_grant WHERE order_id = ${order?.id ?? ""}) AS grants,
           (SELECT count(*)::int FROM shipment WHERE order_id = ${order?.id ?? ""}) AS shipments`;
  expect(effects).toEqual({ deductions: 1, grants: 2, shipments: 1 });
});

test("from the provider admin page, 10 concurrent duplicates and a tampered one change nothing more", async ({
  page,
  context,
}) => {
  const shop = new ShopPage(page);
  await placeAndPay(shop);
  const [order] = await ordersOf(await shopperId(context));
  const [payment] =
    await database()`SELECT out_trade_no FROM payment_order WHERE order_id = ${order?.id ?? ""}`;
  const outTradeNo = String(payment?.out_trade_no);

  await page.goto(`/provider/admin?token=${E2E_ADMIN_TOKEN}`);
  const trade = page.getByRole("article", { name: `Trade ${outTradeNo}` });
  await expect(trade.getByTestId("trade-status")).toHaveText("PAID");
  const paidNotification = trade.getByRole("region", { name: "Notification payment.succeeded" });
  await paidNotification.getByLabel("N").fill("10");
  await paidNotification.getByRole("button", { name: "Fire N identical notifications at once" }).click();
  await expect(page.getByRole("status").filter({ hasText: "FIRE_CONCURRENT" })).toHaveText(
    "FIRE_CONCURRENT: 10 sent, 10 acknowledged by the merchant",
  );
  await paidNotification.getByRole("button", { name: "Send with a tampered signature" }).click();
  await expect(page.getByRole("status").filter({ hasText: "TAMPERED" })).toHaveText(
    "TAMPERED_SIGNATURE: 1 sent, 0 acknowledged by the merchant",
  );
  // The rejected attempt is on the timeline with the merchant's 401.
  await expect(
    trade
      .getByTestId("delivery-attempt")
      .filter({ hasText: "TAMPERED_SIGNATURE" })
      .filter({ hasText: "401" }),
  ).toHaveCount(1);

  expect(await paymentFacts(order?.id ?? "")).toEqual({ payments: 1, successes: 1, events: 1 });
  // The tampered one failed verification: it is counted on the operations page (counts are written every
  // 2 s, the page refreshes itself every 3 s), never stored as a fact of this payment.
  await page.goto("/admin");
  await expect(page.getByTestId("refused-BAD_SIGNATURE")).toHaveText(/^[1-9]\d*$/, { timeout: 15_000 });
  await expect(
    page.getByTestId("notification-issue").filter({ hasText: outTradeNo }).filter({ hasText: "SIGNATURE" }),
  ).toHaveCount(0);
  const [refused] = await database()`
    SELECT coalesce(sum(count), 0)::int AS n FROM refused_notification WHERE reason = 'BAD_SIGNATURE'`;
  expect(refused?.n).toBeGreaterThanOrEqual(1);
  const outcomes = await database()`
    SELECT outcome, count(*)::int AS n FROM payment_notification WHERE out_trade_no = ${outTradeNo}
     GROUP BY outcome ORDER BY outcome`;
  const byOutcome = Object.fromEntries(outcomes.map((r) => [r.outcome, r.n]));
  expect(byOutcome.PROCESSED).toBe(1);
  expect(Object.keys(byOutcome).filter((o) => o.includes("SIGNATURE"))).toEqual([]);
  expect(byOutcome.DUPLICATE).toBeGreaterThanOrEqual(10);
});
