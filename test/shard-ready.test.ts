import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * Ready to shard by shopper (docs/scale-out.md, "Ready to shard"): Citus distributes a table by one column,
 * `user_id` here, and can only enforce a unique index that contains it. So every unique index of the
 * merchant's schema must lead with `user_id`, or be one of the keys below, each with the reason it is
 * what it is. Read from `pg_indexes` of the migrated database, so a new migration is checked as it lands.
 */

/** Keys that must stay unique across all shoppers: the provider and the shopper name things by them alone. */
const GLOBAL_KEYS: Record<string, string> = {
  // The provider knows a payment only by its trade number; a notification names it and no shopper.
  payment_order_out_trade_no_uq: "provider's key for a payment",
  // One provider transaction is one payment, whoever's (a clash is detected by this index).
  payment_order_transaction_id_uq: "provider's transaction id",
  // The refund number the provider deduplicates on, across the merchant's whole account.
  refund_order_provider_refund_no_uq: "provider's key for a refund",
  // A coupon code is typed by a person and names one coupon.
  benefit_grant_code_uq: "coupon code",
  // …and is spent by one order at a time.
  coupon_redemption_active_code_uq: "coupon code, while spent",
};

/** Tables that are not distributed by shopper, and what each would be instead. */
const NOT_BY_SHOPPER: Record<string, string> = {
  sku: "reference table (the catalogue; stock is keyed by SKU, see docs/scale-out.md)",
  rate_limit: "the gateway's counters (or Redis): local, not business data",
  worker_heartbeat: "operations: one row per worker process",
  refused_notification: "operations: counts of refused callbacks per minute",
  reconciliation_report: "operations: one reconciliation of the whole database per period",
  reconciliation_request: "operations: at most one Reconcile now waiting",
  attempt_flush: "operations: the attempt log's flushes, by id (each written once)",
  // The provider's inbox: written before the notification is verified and its payment (so its shopper) known.
  payment_notification: "provider's inbox, distributed by notification id",
  // MockPay is the provider: its tables stand for another company's database.
  provider_trade: "MockPay",
  provider_notification: "MockPay",
  provider_delivery_attempt: "MockPay",
  provider_refund: "MockPay",
  provider_endpoint: "MockPay",
  provider_endpoint_key: "MockPay",
};

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 1 });
});
afterAll(() => t.drop());

interface UniqueIndex {
  table: string;
  name: string;
  columns: string[];
}

async function uniqueIndexes(): Promise<UniqueIndex[]> {
  const rows = await t.sql<{ tablename: string; indexname: string; indexdef: string }[]>`
    SELECT tablename, indexname, indexdef FROM pg_indexes
     WHERE schemaname = 'public' AND indexdef LIKE 'CREATE UNIQUE INDEX%' ORDER BY tablename, indexname`;
  return rows.map((r) => ({
    table: r.tablename,
    name: r.indexname,
    // "CREATE UNIQUE INDEX x ON public.t USING btree (a, b) WHERE …": the columns in the first parentheses.
    columns: (/USING \w+ \(([^)]*)\)/.exec(r.indexdef)?.[1] ?? "").split(",").map((c) => c.trim()),
  }));
}

function unexplained(indexes: UniqueIndex[]): string[] {
  return indexes
    .filter((i) => i.columns[0] !== "user_id" && !(i.name in GLOBAL_KEYS) && !(i.table in NOT_BY_SHOPPER))
    .map((i) => `${i.name} on ${i.table} (${i.columns.join(", ")})`);
}

describe("the schema is ready to shard by shopper", () => {
  it("has every unique index lead with user_id, or be a global key or on a table not distributed", async () => {
    const indexes = await uniqueIndexes();
    expect(indexes.length).toBeGreaterThan(40);
    expect(unexplained(indexes)).toEqual([]);
  });

  it("has every reference between shopper-owned tables go by (user_id, …), so a shopper's rows join on one shard", async () => {
    const fks = await t.sql<{ name: string; from_table: string; to_table: string; columns: string[] }[]>`
      SELECT c.conname AS name, c.conrelid::regclass::text AS from_table, c.confrelid::regclass::text AS to_table,
             array(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i)
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) AS columns
        FROM pg_constraint c
       WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace`;
    expect(fks.length).toBeGreaterThan(15);
    const crossShard = fks
      .filter((fk) => !(fk.from_table in NOT_BY_SHOPPER) && !(fk.to_table in NOT_BY_SHOPPER))
      .filter((fk) => fk.columns[0] !== "user_id")
      .map((fk) => `${fk.name}: ${fk.from_table} (${fk.columns.join(", ")}) → ${fk.to_table}`);
    expect(crossShard).toEqual([]);
  });

  it("fails a migration that adds a unique index without the shopper", async () => {
    await t.sql`CREATE UNIQUE INDEX orders_request_id_only_uq ON orders (request_id)`;
    try {
      expect(unexplained(await uniqueIndexes())).toEqual([
        "orders_request_id_only_uq on orders (request_id)",
      ]);
    } finally {
      await t.sql`DROP INDEX orders_request_id_only_uq`;
    }
  });

  it("keeps its lists true: every entry names an index or table that exists", async () => {
    const indexes = await uniqueIndexes();
    const names = new Set(indexes.map((i) => i.name));
    const tables = new Set(indexes.map((i) => i.table));
    expect(Object.keys(GLOBAL_KEYS).filter((n) => !names.has(n))).toEqual([]);
    expect(Object.keys(NOT_BY_SHOPPER).filter((n) => !tables.has(n))).toEqual([]);
    // Every key of a shopper-owned table, by shopper: primary keys (user_id, id) and the business keys.
    expect(
      indexes
        .filter((i) => i.columns[0] === "user_id")
        .map((i) => i.name)
        .sort(),
    ).toEqual([
      "api_token_revocation_pkey",
      "benefit_grant_pkey",
      "benefit_grant_user_code_uq",
      "benefit_grant_user_order_type_uq",
      "benefit_reversal_coupon_uq",
      "benefit_reversal_pkey",
      "benefit_reversal_refund_type_uq",
      "coupon_redemption_pkey",
      "coupon_redemption_user_order_uq",
      "idempotency_record_pkey",
      "idempotency_record_user_biz_key_uq",
      "ledger_transfer_fact_uq",
      "ledger_transfer_pkey",
      "message_consume_record_event_consumer_uq",
      "message_consume_record_pkey",
      "order_item_order_id_sku_id_uq",
      "order_item_pkey",
      "orders_pkey",
      "orders_user_id_request_id_uq",
      "outbox_event_dedupe_key_uq",
      "outbox_event_pkey",
      "payment_order_open_per_order_uq",
      "payment_order_pkey",
      "refund_line_pkey",
      "refund_line_refund_sku_uq",
      "refund_order_pkey",
      "refund_order_user_refund_no_uq",
      "return_receipt_pkey",
      "return_receipt_refund_sku_uq",
      "shipment_line_order_sku_uq",
      "shipment_line_pkey",
      "shipment_order_uq",
      "shipment_pkey",
      "stock_deduct_record_order_sku_uq",
      "stock_deduct_record_pkey",
      "stock_return_record_pkey",
      "stock_return_record_refund_sku_uq",
    ]);
  });
});
