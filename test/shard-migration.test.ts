import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseBefore, databaseBefore } from "./support/migrations";
import { ORDER_CHILD_TABLES, SHOPPER_TABLES } from "./support/shopper-tables";

/**
 * Migration 0022 (keys by shopper, issue 16) on a database that already holds a shopper's whole story in the
 * shape before it: every row it adds user_id to gets its order's shopper, nothing is lost, and the new keys
 * and references hold. Two shoppers, so a row given the wrong one would show.
 */

const BEFORE = 22; // migrations 0000–0021
/** The shopper tables there were then (later migrations add tables of their own). */
const LATER = ["ledger_transfer", "return_receipt", "shipment_line"];
const TABLES = SHOPPER_TABLES.filter((table) => !LATER.includes(table));
const CHILD_TABLES = ORDER_CHILD_TABLES.filter((table) => !LATER.includes(table));
let database: DatabaseBefore;
let sql: postgres.Sql;

beforeAll(async () => {
  database = await databaseBefore(BEFORE, "checkout_shard_migration");
  sql = database.sql;
});
afterAll(() => database?.drop());

/** One shopper's paid, shipped, partly refunded order with a coupon spent and an event consumed, as 0021 stored it. */
async function storyBefore(userId: string, n: number) {
  const [order] = await sql<{ id: string }[]>`
    INSERT INTO orders (user_id, request_id, amount_cents, status) VALUES (${userId}, ${`req-${n}`}, 2000, 'SHIPPED')
    RETURNING id`;
  const orderId = order?.id ?? "";
  await sql`INSERT INTO order_item (order_id, sku_id, sku_name, quantity, unit_price_cents, line_total_cents)
            VALUES (${orderId}, 'SKU-M', 'M', 2, 1000, 2000)`;
  const [payment] = await sql<{ id: string }[]>`
    INSERT INTO payment_order (order_id, out_trade_no, amount_cents, currency, status, transaction_id)
    VALUES (${orderId}, ${`P-${n}`}, 2000, 'USD', 'SUCCESS', ${`T-${n}`}) RETURNING id`;
  const [refund] = await sql<{ id: string }[]>`
    INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, status)
    VALUES (${userId}, ${`R-${n}`}, ${`PR-${n}`}, ${orderId}, ${payment?.id ?? ""}, 1000, 'USD', 'REFUND_SUCCESS')
    RETURNING id`;
  const refundId = refund?.id ?? "";
  await sql`INSERT INTO refund_line (refund_id, order_id, sku_id, quantity) VALUES (${refundId}, ${orderId}, 'SKU-M', 1)`;
  await sql`INSERT INTO stock_deduct_record (order_id, sku_id, quantity) VALUES (${orderId}, 'SKU-M', 2)`;
  await sql`INSERT INTO stock_return_record (refund_id, order_id, sku_id, quantity)
            VALUES (${refundId}, ${orderId}, 'SKU-M', 1)`;
  await sql`INSERT INTO shipment (order_id, tracking_no) VALUES (${orderId}, ${`TRK-${n}`})`;
  await sql`INSERT INTO benefit_grant (order_id, user_id, benefit_type, amount, code)
            VALUES (${orderId}, ${userId}, 'LOYALTY_POINTS', 20, NULL), (${orderId}, ${userId}, 'COUPON', 500, ${`C-${n}`})`;
  await sql`INSERT INTO benefit_reversal (order_id, refund_id, benefit_type, amount)
            VALUES (${orderId}, ${refundId}, 'LOYALTY_POINTS', 10)`;
  await sql`INSERT INTO coupon_redemption (code, user_id, order_id, discount_cents)
            VALUES (${`C-${n}`}, ${userId}, ${orderId}, 500)`;
  const [event] = await sql<{ id: string }[]>`
    INSERT INTO outbox_event (event_type, aggregate_type, aggregate_id, dedupe_key, payload)
    VALUES ('OrderPaid', 'order', ${orderId}, ${`OrderPaid:${orderId}`}, ${sql.json({ orderId })}) RETURNING id`;
  await sql`INSERT INTO message_consume_record (event_id, consumer_name, status) VALUES (${event?.id ?? ""}, 'stock', 'DONE')`;
  await sql`INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, expires_at)
            VALUES (${userId}, 'order.create', ${`req-${n}`}, 'f', 'SUCCESS', now() + interval '1 day')`;
  return orderId;
}

describe("migration 0022: every shopper-owned row keyed by its shopper", () => {
  it("gives each existing row its order's shopper, keeps every row, and the new keys hold", async () => {
    await sql`INSERT INTO sku (id, name, price_cents, stock, initial_stock) VALUES ('SKU-M', 'M', 1000, 10, 10)`;
    const alice = await storyBefore("alice", 1);
    const bob = await storyBefore("bob", 2);
    const counts = async () =>
      Object.fromEntries(
        await Promise.all(
          TABLES.map(
            async (table) =>
              [table, Number((await sql`SELECT count(*) AS n FROM ${sql(table)}`)[0]?.n)] as const,
          ),
        ),
      );
    const before = await counts();

    await database.migrateToLatest();

    expect(await counts()).toEqual(before);
    for (const table of CHILD_TABLES) {
      const rows = await sql<{ order_id: string; user_id: string }[]>`
        SELECT order_id, user_id FROM ${sql(table)} ORDER BY user_id`;
      expect(
        rows.map((r) => [r.order_id, r.user_id]),
        table,
      ).toEqual([
        [alice, "alice"],
        ...(table === "benefit_grant" ? [[alice, "alice"]] : []),
        [bob, "bob"],
        ...(table === "benefit_grant" ? [[bob, "bob"]] : []),
      ]);
    }
    const events = await sql<{ user_id: string; aggregate_id: string }[]>`
      SELECT e.user_id, e.aggregate_id, c.user_id AS consumed_by
        FROM outbox_event e JOIN message_consume_record c ON c.user_id = e.user_id AND c.event_id = e.id
       ORDER BY e.user_id`;
    expect(events.map((e) => [e.aggregate_id, e.user_id])).toEqual([
      [alice, "alice"],
      [bob, "bob"],
    ]);
    // A row naming another shopper's order is refused now: references go by (user_id, order).
    await expect(
      sql`INSERT INTO shipment (user_id, order_id, tracking_no) VALUES ('bob', ${alice}, 'TRK-X')`,
    ).rejects.toMatchObject({ code: "23503" });
    // The stored-outcome function goes by the record's key too.
    const [record] = await sql<{ id: number }[]>`
      INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, expires_at)
      VALUES ('alice', 'order.create', 'req-new', 'f', now() + interval '1 day') RETURNING id`;
    await sql`SELECT idempotency_store_outcome('alice', ${record?.id ?? 0}, 1, 'SUCCESS', '{"a":1}'::json, 'x')`;
    await expect(
      sql`SELECT idempotency_store_outcome('bob', ${record?.id ?? 0}, 1, 'SUCCESS', '{"a":1}'::json, 'x')`,
    ).rejects.toMatchObject({ code: "XO001" });
  });
});
