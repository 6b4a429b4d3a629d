import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseBefore, databaseBefore } from "./support/migrations";

/**
 * Migration 0024 (returns, issue 29) on orders shipped before it: each shipment learns what it carried, and
 * stock that a refund gave back after shipping (as refunds did then) counts as goods received back, so what
 * every order holds is still what it shipped less what came back.
 */
let database: DatabaseBefore;

beforeAll(async () => {
  database = await databaseBefore(24, "checkout_returns_migration");
});
afterAll(() => database?.drop());

describe("migration 0024: shipment lines and receipts for what was shipped and given back before", () => {
  it("records what each shipment carried and takes stock given back after it as received", async () => {
    const { sql } = database;
    await sql`INSERT INTO sku (id, name, price_cents, stock, initial_stock) VALUES ('SKU-K', 'K', 1000, 10, 10)`;
    const order = async (n: number) => {
      const [row] = await sql<{ id: string }[]>`
        INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, status)
        VALUES ('alice', ${`req-${n}`}, 'f', 3000, 'SHIPPED') RETURNING id`;
      const orderId = row?.id ?? "";
      await sql`INSERT INTO order_item (user_id, order_id, sku_id, sku_name, quantity, unit_price_cents, line_total_cents)
                VALUES ('alice', ${orderId}, 'SKU-K', 'K', 3, 1000, 3000)`;
      const [payment] = await sql<{ id: string }[]>`
        INSERT INTO payment_order (user_id, order_id, out_trade_no, amount_cents, currency, status, transaction_id)
        VALUES ('alice', ${orderId}, ${`P-${n}`}, 3000, 'USD', 'SUCCESS', ${`T-${n}`}) RETURNING id`;
      const refund = async (no: string, at: string) => {
        const [r] = await sql<{ id: string }[]>`
          INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, status, created_at)
          VALUES ('alice', ${no}, ${`PR-${no}`}, ${orderId}, ${payment?.id ?? ""}, 1000, 'USD', 'REFUND_SUCCESS', ${at}) RETURNING id`;
        await sql`INSERT INTO refund_line (user_id, refund_id, order_id, sku_id, quantity) VALUES ('alice', ${r?.id ?? ""}, ${orderId}, 'SKU-K', 1)`;
        await sql`INSERT INTO stock_return_record (user_id, refund_id, order_id, sku_id, quantity, created_at)
                  VALUES ('alice', ${r?.id ?? ""}, ${orderId}, 'SKU-K', 1, ${at})`;
      };
      return { orderId, refund };
    };
    // Three kettles deducted; one refunded before the shipment (it stayed), one after (given back then).
    const { orderId, refund } = await order(1);
    await sql`INSERT INTO stock_deduct_record (user_id, order_id, sku_id, quantity, created_at)
              VALUES ('alice', ${orderId}, 'SKU-K', 3, '2026-01-01T10:00:00Z')`;
    await refund("before", "2026-01-01T10:01:00Z");
    await sql`INSERT INTO shipment (user_id, order_id, tracking_no, created_at) VALUES ('alice', ${orderId}, 'TRK-1', '2026-01-01T10:02:00Z')`;
    await refund("after", "2026-01-01T10:03:00Z");

    await database.migrateToLatest();

    expect(await sql`SELECT sku_id, quantity FROM shipment_line WHERE order_id = ${orderId}`).toEqual([
      { sku_id: "SKU-K", quantity: 2 },
    ]);
    const receipts = await sql`
      SELECT r.refund_no, rr.quantity, rr.receipt_key FROM return_receipt rr JOIN refund_order r ON r.user_id = rr.user_id AND r.id = rr.refund_id`;
    expect(receipts).toEqual([{ refund_no: "after", quantity: 1, receipt_key: "before-returns" }]);
    // Held (3 deducted − 2 given back) = shipped (2) − received (1).
    const [held] = await sql<{ held: number }[]>`
      SELECT (SELECT sum(quantity) FROM stock_deduct_record WHERE order_id = ${orderId})
           - (SELECT sum(quantity) FROM stock_return_record WHERE order_id = ${orderId}) AS held`;
    expect(Number(held?.held)).toBe(2 - 1);
  });
});
