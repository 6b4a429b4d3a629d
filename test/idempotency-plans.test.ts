import { randomUUID } from "node:crypto";
import {
  type IdempotentOperation,
  postgresStore,
  recordSchema,
  runIdempotent,
} from "@exactly-once/idempotency";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgClient } from "~/server/db/client";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The record's statements under the plans PostgreSQL caches for them. A prepared statement gets a generic plan
 * (one for every parameter value) after a few runs; made while the table's statistics are unknown (a new
 * table, not yet analyzed), it may pick any index that leads with the scope. The first execution's statements
 * must then still find their row by one index entry, however many records the scope holds.
 */
let t: TestDatabase;
const names = { table: "plan_probe_key", storeOutcome: "plan_probe_key_store_outcome" };

beforeAll(async () => {
  t = await createTestDatabase();
  await t.sql.unsafe(recordSchema(names));
  // Its statistics stay unknown for the whole test.
  await t.sql.unsafe(`ALTER TABLE ${names.table} SET (autovacuum_enabled = false)`);
});
afterAll(async () => {
  await t.drop();
});

/** A pool whose every prepared statement runs its generic plan from the first execution on. */
function genericPlans(): postgres.Sql {
  return pgClient(t.url, {
    max: 2,
    onnotice: () => {},
    connection: { plan_cache_mode: "force_generic_plan" },
  });
}

const operation = (
  key: string,
  claim: "transaction" | "lease",
): IdempotentOperation<{ key: string }, postgres.ReservedSql> => ({
  scope: `one-scope-many-records-${claim}`,
  bizType: "test.plans",
  key,
  request: { key },
  claim,
  execute: async () => ({ result: { key } }),
});

async function indexEntriesRead(): Promise<{ scans: number; read: number }> {
  const [row] = await t.sql<{ scans: number; read: number }[]>`
    SELECT coalesce(sum(idx_scan), 0)::int AS scans, coalesce(sum(idx_tup_read), 0)::int AS read
      FROM pg_stat_user_indexes WHERE relname = ${names.table}`;
  return row ?? { scans: 0, read: 0 };
}

describe("the record's statements under generic plans of a table never analyzed", () => {
  it.each(["transaction", "lease"] as const)(
    "stores each outcome by one index entry, whatever the scope holds (claim: %s)",
    async (claim) => {
      const before = await indexEntriesRead();
      const pool = genericPlans();
      const store = postgresStore(pool, names);
      const config = { ttlMs: 60_000, leaseMs: 10_000, waitMs: 2_000 };
      const calls = 300;
      for (let i = 0; i < calls; i++) {
        const result = await runIdempotent(store, operation(randomUUID(), claim), config);
        expect(result.replayed).toBe(false);
      }
      // A backend's statistics reach the shared counters when it exits.
      await pool.end();
      let seen = await indexEntriesRead();
      for (let waited = 0; seen.scans - before.scans < calls && waited < 50; waited++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        seen = await indexEntriesRead();
      }
      // At least one scan per outcome stored; read by the scope alone, they would read 300 × 299 / 2 entries.
      expect(seen.scans - before.scans).toBeGreaterThanOrEqual(calls);
      expect(seen.read - before.read).toBeLessThanOrEqual(2 * calls);
    },
  );
});
