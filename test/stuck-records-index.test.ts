import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runIdempotent } from "~/server/operations";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The alert log and reconciliation ask every 30 s for idempotency records whose lease ran out
 * (src/server/admin/alerts.ts, src/server/reconciliation/once.ts). Without an index that question read the
 * whole table: a million rows in bench scenario 13. The partial index (migration 0029) holds only the records
 * whose lease is held: only a lease claim sets one. And because no index names the status, nor the lease a
 * one-transaction claim leaves empty, that claim's outcome is a HOT update: with migration 0027's index
 * (`WHERE status = 'PROCESSING'`) every outcome wrote a new entry into each of the table's four indexes.
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 1 });
});
afterAll(async () => {
  await t.drop();
});

describe("the stuck-record question", () => {
  it("is answered from the index of records still being worked on, not by reading the table", async () => {
    await t.sql`
      INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, expires_at)
      SELECT 'u' || (i % 50), 'order.create', 'k' || i, 'f', 'SUCCESS', now() + interval '1 day'
        FROM generate_series(1, 5000) AS i`;
    await t.sql`ANALYZE idempotency_record`;
    const plan = await t.sql.begin(async (sql) => {
      // Only an index can keep the planner off the table now: without one it must scan it anyway.
      await sql`SET LOCAL enable_seqscan = off`;
      return sql.unsafe(
        "EXPLAIN SELECT count(*)::int FROM idempotency_record WHERE status = 'PROCESSING' AND locked_until < now()",
      );
    });
    const text = plan.map((row) => Object.values(row)[0]).join("\n");
    expect(text).toContain("idempotency_record_lease_idx");
    expect(text).not.toContain("Seq Scan");
  });
});

describe("a one-transaction claim's outcome", () => {
  it("is a HOT update: the claim's row changes no indexed column", async () => {
    const calls = 40;
    for (let i = 0; i < calls; i++) {
      await runIdempotent(t.db, {
        scope: "hot-shopper",
        bizType: "test.hot",
        key: randomUUID(),
        request: { i },
        storedErrors: [],
        execute: async () => ({ result: { i } }),
      });
    }
    // The statistics reach the view once the connection flushes them: at once when asked (the pool's one).
    await t.db.$client`SELECT pg_stat_force_next_flush()`;
    let stats = { upd: 0, hot: 0 };
    for (let i = 0; i < 150 && stats.upd < calls; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      [stats = stats] = await t.sql<{ upd: number; hot: number }[]>`
        SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables
         WHERE relname = 'idempotency_record'`;
    }
    expect(stats.upd).toBe(calls);
    // A row whose page is full moves (not HOT); the rest stay.
    expect(stats.hot).toBeGreaterThanOrEqual(calls * 0.8);
  });
});
