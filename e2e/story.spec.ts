import { expect, test } from "@playwright/test";
import { E2E_ADMIN_TOKEN } from "./support/config";
import { database, ordersOf, shopperId } from "./support/db";
import { placeAndPayWithDoubleClicks } from "./support/flows";
import { ShopPage } from "./support/shop-page";

/** What the database holds about one order's duplicates: requests per outcome, and MockPay's deliveries. */
async function recorded(orderId: string) {
  const sql = database();
  const attempts = await sql<{ layer: string; outcome: string; n: number }[]>`
    SELECT a.layer, a.outcome, sum(a.count)::int AS n
      FROM duplicate_attempt a
      JOIN orders o ON o.user_id = a.scope
     WHERE o.id = ${orderId} AND a.layer = 'service'
       AND (a.key = o.request_id OR a.key = o.id::text)
     GROUP BY 1, 2`;
  const [notifications] = await sql<{ delivered: number; processed: number; duplicate: number }[]>`
    SELECT count(*)::int AS delivered, count(*) FILTER (WHERE n.outcome = 'PROCESSED')::int AS processed,
           count(*) FILTER (WHERE n.outcome = 'DUPLICATE')::int AS duplicate
      FROM payment_notification n JOIN payment_order p ON p.out_trade_no = n.out_trade_no
     WHERE p.order_id = ${orderId}`;
  const [consumed] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM message_consume_record c JOIN outbox_event e ON e.id = c.event_id
     WHERE e.aggregate_id = ${orderId} AND c.result = 'APPLIED'`;
  const service = (outcome: string) => attempts.find((a) => a.outcome === outcome)?.n ?? 0;
  return { service, notifications, consumed: consumed?.n ?? 0 };
}

test("the order's story: the double click, MockPay's duplicates and the consumers, in their lanes, with the database's counts", async ({
  page,
  context,
}) => {
  await placeAndPayWithDoubleClicks(new ShopPage(page));
  const [order] = await ordersOf(await shopperId(context));
  const orderId = order?.id ?? "";

  const story = page.getByTestId("order-story");
  await expect(story).toBeVisible();
  // The page reads what the layers recorded (flushed once a second); it says what the database holds.
  await expect
    .poll(
      async () => {
        const db = await recorded(orderId);
        const { delivered, processed, duplicate } = db.notifications ?? {
          delivered: 0,
          processed: 0,
          duplicate: 0,
        };
        const expected = [
          `executed ${db.service("first")}, replayed ${db.service("replayed")}, made ${db.service("waited")} wait`,
          `${delivered} delivered, ${processed} processed, ${duplicate} answered as duplicates`,
          // Each copy MockPay sent again names what absorbed it: the payment's conditional update.
          `${duplicate} × the conditional update PENDING → SUCCESS matched no row: the payment is already SUCCESS`,
        ];
        const shown = [
          (await page.getByTestId("story-service").textContent()) ?? "",
          (await page.getByTestId("story-provider").textContent()) ?? "",
          (await page.getByTestId("story-provider-absorbers").textContent()) ?? "",
        ];
        return expected.every((text, i) => shown[i]?.includes(text)) && processed === 1 && delivered > 1;
      },
      { timeout: 20_000 },
    )
    .toBe(true);
  // One order and one payment were executed (the order's request id, and its natural key for the payment).
  const db = await recorded(orderId);
  expect(db.service("first")).toBe(2);
  await expect(page.getByTestId("story-consumer")).toContainText(`${db.consumed} applied`);
  // The effects drawn as taken: one per executed request, one per processed notification, one per consumer.
  expect(await story.locator(".mark.effect").count()).toBeGreaterThanOrEqual(2);
  // The processed notification is a mark of its own, never under its duplicates; every absorbed mark names its absorber.
  const absorbed = story.locator(".mark:not(.effect)");
  for (const by of await absorbed.evaluateAll((marks) =>
    marks.map((m) => m.getAttribute("data-absorbed-by")),
  ))
    expect(by).toBeTruthy();

  // The operator sees the same story for any order.
  await page.goto(`/admin/orders/${orderId}?token=${E2E_ADMIN_TOKEN}`);
  await expect(page.getByTestId("order-story")).toBeVisible();
  await expect(page.getByTestId("story-provider")).toContainText("1 processed");
});
