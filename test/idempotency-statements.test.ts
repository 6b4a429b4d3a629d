import { randomUUID } from "node:crypto";
import {
  batchStats,
  type IdempotencyConfig,
  type IdempotentOperation,
  postgresStore,
  runIdempotent,
} from "@exactly-once/idempotency";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgClient } from "~/server/db/client";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * What the core sends for a first execution, statement by statement (docs/idempotency.md, "Round trips"): each
 * statement costs the app's process about as much as the next whatever it carries, so the count is part of the
 * design. Read off postgres.js's `debug` hook, which sees every query a connection builds, in order.
 */
let t: TestDatabase;
let pool: postgres.Sql;
const sent: { connection: number; text: string }[] = [];

beforeAll(async () => {
  t = await createTestDatabase();
  pool = pgClient(t.url, {
    max: 10,
    onnotice: () => {},
    debug: (connection, text) => sent.push({ connection, text: text.replace(/\s+/g, " ").trim() }),
  });
});
afterAll(async () => {
  await pool.end();
  await t.drop();
});

const names = { table: "idempotency_record", storeOutcome: "idempotency_store_outcome" };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One business statement, tagged with its key so the log shows whose it is. */
const operation = (key: string, pauseMs = 0): IdempotentOperation<{ key: string }, postgres.ReservedSql> => ({
  scope: "statements-shopper",
  bizType: "test.statements",
  key,
  request: { key },
  claim: "transaction",
  batchable: true,
  execute: async (tx) => {
    if (pauseMs > 0) await sleep(pauseMs);
    await tx`SELECT ${key}::text AS business`;
    return { result: { key } };
  },
});

/** What each statement is, by its text, so a list reads as the protocol. */
function kindOf(text: string): string {
  if (text.startsWith("BEGIN; SELECT set_config('lock_timeout'")) return "BEGIN+lock_timeout+clock";
  if (text.startsWith("BEGIN; SET LOCAL lock_timeout")) return "BEGIN+lock_timeout";
  if (text.startsWith("INSERT INTO")) {
    return text.includes("set_config('lock_timeout', NULL, true)") ? "claim+lock_timeout back" : "claim";
  }
  if (text.startsWith("SELECT") && text.includes("AS business")) return "business";
  if (text.startsWith("UPDATE")) return "outcome";
  if (text.startsWith("SELECT user_id, id, fingerprint")) return "read record";
  return text;
}

/** The statements one connection was sent since `from`, from its first BEGIN (the connection's start-up query aside). */
function onConnection(connection: number, from: number): string[] {
  const kinds = sent
    .slice(from)
    .filter((s) => s.connection === connection)
    .map((s) => kindOf(s.text));
  return kinds.slice(kinds.findIndex((kind) => kind.startsWith("BEGIN")));
}

describe("the statements of a first execution", () => {
  it("alone: BEGIN with the claim's lock_timeout in one message, the claim that puts it back, the business, the outcome, COMMIT", async () => {
    const store = postgresStore(pool, names);
    const from = sent.length;
    const result = await runIdempotent(store, operation(randomUUID()), {
      ttlMs: 60_000,
      leaseMs: 10_000,
      waitMs: 2_000,
    });
    expect(result.replayed).toBe(false);
    const [first] = sent.slice(from);
    expect(onConnection(first?.connection ?? -1, from)).toEqual([
      "BEGIN+lock_timeout+clock",
      "claim+lock_timeout back",
      "business",
      "outcome",
      "COMMIT",
    ]);
    // The claim waits for another holder of its key at most the call's waitMs (what is left of it).
    const begin = sent.slice(from).find((s) => s.text.startsWith("BEGIN"));
    expect(begin?.text).toMatch(/'(19\d\d|2000)ms'/);
  });

  it("in a batch: no savepoint released after a kept call; a call that leaves is rolled back and released in one message", async () => {
    const store = postgresStore(pool, names);
    const config: IdempotencyConfig = {
      ttlMs: 60_000,
      leaseMs: 10_000,
      waitMs: 5_000,
      batch: { maxSize: 8, runners: 1 },
    };
    // A key answered before: in the batch its claim finds it taken.
    const taken = randomUUID();
    await runIdempotent(store, operation(taken), config);
    // The first call runs alone; the second takes the one runner for 300 ms; the three after queue and go as one batch.
    const holding = Promise.all([
      runIdempotent(store, operation(randomUUID(), 300), config),
      runIdempotent(store, operation(randomUUID(), 300), config),
    ]);
    await sleep(60);
    const before = batchStats(store).batches;
    const from = sent.length;
    const keys = [randomUUID(), taken, randomUUID()].sort();
    const results = await Promise.all(keys.map((key) => runIdempotent(store, operation(key), config)));
    await holding;
    expect(batchStats(store).batches).toBe(before + 1);
    expect(results.map((r) => r.replayed)).toEqual(keys.map((key) => key === taken));

    const batch = sent.slice(from).find((s) => s.text.startsWith("BEGIN; SET LOCAL lock_timeout"));
    const statements = onConnection(batch?.connection ?? -1, from);
    const ofCall = (kept: boolean) =>
      ["SAVEPOINT batched", "claim", "business"].concat(
        kept ? ["outcome"] : ["ROLLBACK TO SAVEPOINT batched; RELEASE SAVEPOINT batched"],
      );
    expect(statements.slice(0, 1 + 3 * 4 + 1)).toEqual([
      "BEGIN+lock_timeout",
      ...keys.flatMap((key) => ofCall(key !== taken)),
      "COMMIT",
    ]);
    // The taken key's copy was then answered off the runner, from the record.
    const rows = await t.sql<{ status: string }[]>`
      SELECT status FROM idempotency_record WHERE biz_type = 'test.statements' AND idempotency_key IN ${t.sql(keys)}`;
    expect(rows.map((r) => r.status)).toEqual(["SUCCESS", "SUCCESS", "SUCCESS"]);
  });
});
