import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The alert log and reconciliation ask every 30 s for idempotency records whose lease ran out
 * (src/server/admin/alerts.ts, src/server/reconciliation/once.ts). Without an index that question read the
 * whole table: a million rows in bench scenario 13. The partial index of migration 0027 holds only the records
 * still being worked on.
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
    expect(text).toContain("idempotency_record_processing_idx");
    expect(text).not.toContain("Seq Scan");
  });
});
