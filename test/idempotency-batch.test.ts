import { randomUUID } from "node:crypto";
import { ReplayCache } from "@exactly-once/idempotency";
import { sql as dsql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DomainError } from "~/server/errors";
import {
  batchStatsOf,
  type IdempotencyConfig,
  type IdempotentOperation,
  runIdempotent,
} from "~/server/operations";
import { createTestDatabase, type TestDatabase } from "./support/database";
import {
  countEffects,
  createEffectTable,
  type EffectResult,
  effectOperation,
  writeEffect,
} from "./support/effects";

/**
 * Several first executions in one transaction (packages/idempotency/src/claim-in-batch.ts), counted through the scratch
 * "effect" table: every execution writes one row, so rows counted afterwards are effects that stayed.
 */
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 30 });
  await createEffectTable(t);
});
afterAll(() => t.drop());

/** A config of its own per test: a batcher is made per config, so each test's batches are its own. */
const batched = (runners: number, maxSize = 8): IdempotencyConfig => ({
  ttlMs: 60_000,
  leaseMs: 10_000,
  waitMs: 5_000,
  batch: { maxSize, runners },
});

const operation = (key: string, overrides: Partial<IdempotentOperation<EffectResult>> = {}) =>
  effectOperation("test.batch", key, { claim: "transaction", batchable: true, ...overrides });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Two calls of `ms` each: the first runs alone (nothing else is in flight), the second takes the one runner of
 * `config`, so the calls made meanwhile queue and go as one batch.
 */
async function holdRunner(config: IdempotencyConfig, ms: number) {
  const hold = () => {
    const key = randomUUID();
    return runIdempotent(
      t.db,
      operation(key, {
        execute: async (tx) => {
          await sleep(ms);
          return writeEffect(tx, key);
        },
      }),
      config,
    );
  };
  const holding = Promise.all([hold(), hold()]);
  await sleep(Math.min(50, ms / 5));
  return holding;
}

async function records(keys: string[]) {
  return t.sql<{ key: string; status: string; body: unknown }[]>`
    SELECT idempotency_key AS key, status, response_body AS body FROM idempotency_record
     WHERE biz_type = 'test.batch' AND idempotency_key IN ${t.sql(keys)}`;
}

describe("first executions in batches", () => {
  it("runs a call alone when no other is in flight, and batches only calls that come while others run", async () => {
    const config = batched(2);
    const before = batchStatsOf(t.db);
    for (let i = 0; i < 5; i++) await runIdempotent(t.db, operation(randomUUID()), config);
    // One at a time: none reached a runner.
    expect(batchStatsOf(t.db).submitted).toBe(before.submitted);
    const keys = Array.from({ length: 20 }, () => randomUUID());
    await Promise.all(keys.map((key) => runIdempotent(t.db, operation(key), config)));
    // Together: the first ran alone, the others that came while it ran went to the runners.
    expect(batchStatsOf(t.db).submitted - before.submitted).toBe(19);
    for (const key of keys) expect(await countEffects(t, key)).toBe(1);
  });

  it("runs 60 keys × 3 concurrent copies: one effect and one record per key, every copy the same answer", async () => {
    const config = batched(2);
    const before = batchStatsOf(t.db);
    const keys = Array.from({ length: 60 }, () => randomUUID());
    const calls = keys.flatMap((key) =>
      [0, 1, 2].map(() => ({ key, run: runIdempotent(t.db, operation(key), config) })),
    );
    const settled = await Promise.allSettled(calls.map((c) => c.run));
    expect(settled.filter((s) => s.status === "rejected")).toEqual([]);
    const answers = new Map<string, Set<string>>();
    calls.forEach(({ key }, i) => {
      const outcome = settled[i] as PromiseFulfilledResult<{ result: EffectResult }>;
      answers.set(key, (answers.get(key) ?? new Set()).add(JSON.stringify(outcome.value.result)));
    });
    for (const key of keys) {
      expect(await countEffects(t, key)).toBe(1);
      expect(answers.get(key)?.size).toBe(1);
    }
    const rows = await records(keys);
    expect(rows).toHaveLength(60);
    expect(rows.every((row) => row.status === "SUCCESS")).toBe(true);
    // Calls did share transactions: the test is about batches, not about calls alone.
    const after = batchStatsOf(t.db);
    expect(after.largest).toBeGreaterThan(1);
    expect(after.calls - before.calls).toBeGreaterThan(after.batches - before.batches);
  });

  it("replays copies of keys answered before, sent at once among new keys (no replay cache): the first answers, no effect twice", async () => {
    const config = batched(2);
    const answered: string[] = Array.from({ length: 30 }, () => randomUUID());
    const firsts = await Promise.all(answered.map((key) => runIdempotent(t.db, operation(key), config)));
    const fresh = Array.from({ length: 30 }, () => randomUUID());
    const before = batchStatsOf(t.db);
    // Interleaved, three copies of each answered key among the new ones, all at once.
    const calls = fresh.flatMap((key, i) => [
      { key, replay: false, run: runIdempotent(t.db, operation(key), config) },
      ...[0, 1, 2].map(() => {
        const old = answered[i] ?? "";
        return { key: old, replay: true, run: runIdempotent(t.db, operation(old), config) };
      }),
    ]);
    const results = await Promise.all(calls.map((c) => c.run));
    calls.forEach(({ key, replay }, i) => {
      expect(results[i]?.replayed).toBe(replay);
      if (replay) expect(results[i]?.result).toEqual(firsts[answered.indexOf(key)]?.result);
    });
    for (const key of [...answered, ...fresh]) expect(await countEffects(t, key)).toBe(1);
    const rows = await records([...answered, ...fresh]);
    expect(rows).toHaveLength(60);
    expect(batchStatsOf(t.db).batches).toBeGreaterThan(before.batches);
  });

  it("stores a declared refusal for its key alone: its writes roll back to its savepoint, the others commit", async () => {
    const config = batched(1);
    // Holds the one runner, so the calls below queue and go together as one batch.
    const holding = holdRunner(config, 300);
    const keys = Array.from({ length: 6 }, () => randomUUID());
    const refused = new Set(keys.slice(0, 2));
    const runs = keys.map((key) =>
      runIdempotent(
        t.db,
        operation(key, {
          execute: async (tx) => {
            const written = await writeEffect(tx, key);
            if (refused.has(key)) throw new DomainError("OUT_OF_STOCK", `no stock for ${key}`);
            return written;
          },
        }),
        config,
      ),
    );
    const settled = await Promise.allSettled(runs);
    await holding;
    keys.forEach((key, i) => {
      expect(settled[i]?.status).toBe(refused.has(key) ? "rejected" : "fulfilled");
    });
    for (const key of keys) expect(await countEffects(t, key)).toBe(refused.has(key) ? 0 : 1);
    const rows = new Map((await records(keys)).map((row) => [row.key, row.status]));
    for (const key of keys) expect(rows.get(key)).toBe(refused.has(key) ? "FAILED" : "SUCCESS");
    expect(batchStatsOf(t.db).largest).toBeGreaterThanOrEqual(6);
  });

  it("serves a kept call's outcome from the replay cache no later than its key expires, however long the batch ran before it", async () => {
    // Every key of a batch expires ttl after its BEGIN. Here the batch's first call takes longer than ttl, so the
    // second call's key has expired by the time the batch commits: the cache must not serve it as if it expired
    // ttl after that call's own claim.
    const config: IdempotencyConfig = { ...batched(1), ttlMs: 3_000, cache: new ReplayCache() };
    const holding = holdRunner(config, 300);
    const slow = `a-${randomUUID()}`;
    const late = `b-${randomUUID()}`;
    const [, kept] = await Promise.all([
      runIdempotent(
        t.db,
        operation(slow, {
          execute: async (tx) => {
            await sleep(4_000);
            return writeEffect(tx, slow);
          },
        }),
        config,
      ),
      runIdempotent(t.db, operation(late), config),
    ]);
    await holding;
    expect(kept.replayed).toBe(false);
    // Another payload under the expired key: not a reuse of a live key, but the key taken over and run.
    const again = await runIdempotent(
      t.db,
      operation(late, { request: { label: late, again: true } }),
      config,
    );
    expect(again.replayed).toBe(false);
    expect(await countEffects(t, late)).toBe(2);
  });

  it("lets a claim whose key another transaction holds leave the batch: the rest do not wait for it", async () => {
    const config = batched(1);
    const held = randomUUID();
    // Another instance's holder of `held`, inside its transaction for 1.5 s, then gone without an outcome.
    let claimed!: () => void;
    const inserted = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    const holder = t.sql
      .begin(async (sql) => {
        await sql`
          INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, expires_at)
          VALUES ('shopper-1', 'test.batch', ${held}, 'another', 'PROCESSING', now() + interval '1 minute')`;
        claimed();
        await sleep(1_500);
        throw new Error("the holder goes away");
      })
      .catch(() => undefined);
    await inserted;
    const started = performance.now();
    const others = Array.from({ length: 7 }, () => randomUUID());
    const finished = new Map<string, number>();
    const runs = [held, ...others].map((key) =>
      runIdempotent(t.db, operation(key), config).then((result) => {
        finished.set(key, performance.now() - started);
        return result;
      }),
    );
    await Promise.all(runs);
    await holder;
    // The one runner was never held up by the waiting claim; the held key waited for its holder, then ran.
    for (const key of others) expect(finished.get(key)).toBeLessThan(1_000);
    expect(finished.get(held)).toBeGreaterThan(1_000);
    for (const key of [held, ...others]) expect(await countEffects(t, key)).toBe(1);
  });

  it("lets a call whose business statement would wait for a lock leave the batch: alone, it waits and runs once", async () => {
    const config = batched(1);
    await t.sql`CREATE TABLE IF NOT EXISTS lock_me (id int PRIMARY KEY)`;
    await t.sql`INSERT INTO lock_me VALUES (1) ON CONFLICT DO NOTHING`;
    // Another transaction holds the row for 400 ms.
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const holder = t.sql.begin(async (sql) => {
      await sql`SELECT id FROM lock_me WHERE id = 1 FOR UPDATE`;
      locked();
      await sleep(400);
    });
    await isLocked;
    // Holds the one runner, so the calls below queue and go together as one batch.
    const holding = holdRunner(config, 100);
    const started = performance.now();
    const keys = Array.from({ length: 5 }, () => randomUUID());
    const waiter = keys[0] as string;
    const finished = new Map<string, number>();
    const runs = keys.map((key) =>
      runIdempotent(
        t.db,
        operation(key, {
          execute: async (tx) => {
            if (key === waiter) await tx.execute(dsql`SELECT id FROM lock_me WHERE id = 1 FOR UPDATE`);
            return writeEffect(tx, key);
          },
        }),
        config,
      ).then(() => finished.set(key, performance.now() - started)),
    );
    await Promise.all([...runs, holding, holder]);
    for (const key of keys) expect(await countEffects(t, key)).toBe(1);
    expect(finished.get(waiter)).toBeGreaterThan(250);
    for (const key of keys.slice(1)) expect(finished.get(key)).toBeLessThan(250);
  });

  it("runs every call alone when a kept call's outcome waits past the batch's lock_timeout (a CI run once met it): none fails, each runs once", async () => {
    const config = batched(1);
    // The outcome's UPDATE waits for an advisory lock this test holds: under load, a relation being extended
    // made it wait past the batch's 5 ms the same way, and the batch failed all its kept calls with 25P02.
    await t.sql`
      CREATE OR REPLACE FUNCTION wait_for_the_test() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock_shared(727); RETURN NEW; END $$`;
    await t.sql`CREATE TRIGGER outcome_waits BEFORE UPDATE ON idempotency_record
                FOR EACH ROW WHEN (NEW.biz_type = 'test.batch.outcome') EXECUTE FUNCTION wait_for_the_test()`;
    try {
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holder = t.sql.begin(async (sql) => {
        await sql`SELECT pg_advisory_xact_lock(727)`;
        locked();
        await sleep(300);
      });
      await isLocked;
      // Holds the one runner, so the calls below queue and go together as one batch.
      const holding = holdRunner(config, 100);
      const keys = Array.from({ length: 5 }, () => randomUUID());
      const before = batchStatsOf(t.db);
      const runs = keys.map((key) =>
        runIdempotent(
          t.db,
          effectOperation("test.batch.outcome", key, { claim: "transaction", batchable: true }),
          config,
        ),
      );
      const settled = await Promise.allSettled(runs);
      await Promise.all([holding, holder]);
      expect(settled.filter((s) => s.status === "rejected")).toEqual([]);
      expect(batchStatsOf(t.db).batches).toBeGreaterThan(before.batches);
      for (const key of keys) expect(await countEffects(t, key)).toBe(1);
      const rows = await t.sql<{ status: string }[]>`
        SELECT status FROM idempotency_record WHERE biz_type = 'test.batch.outcome'`;
      expect(rows.map((row) => row.status)).toEqual(Array(5).fill("SUCCESS"));
    } finally {
      await t.sql`DROP TRIGGER outcome_waits ON idempotency_record`;
    }
  });

  it("keeps nothing of a batch whose connection dies: its calls fail retryably, and the retry runs each once", async () => {
    const config = batched(1);
    // Holds the one runner, so the calls below queue and go together as one batch.
    const holding = holdRunner(config, 300);
    // Keys sort by their text in a batch: the killer comes third of five.
    const keys = ["a", "b", "c", "d", "e"].map((prefix) => `${prefix}-${randomUUID()}`);
    const killer = keys[2] as string;
    const runs = keys.map((key) =>
      runIdempotent(
        t.db,
        operation(key, {
          execute: async (tx) => {
            if (key === killer) await tx.execute(dsql`SELECT pg_terminate_backend(pg_backend_pid())`);
            return writeEffect(tx, key);
          },
        }),
        config,
      ),
    );
    const settled = await Promise.allSettled(runs);
    await holding;
    // The two before the killer were in the transaction that died, and the killer with them: 503, retryable.
    for (const i of [0, 1, 2]) {
      expect(settled[i]).toMatchObject({ status: "rejected", reason: { code: "SERVICE_UNAVAILABLE" } });
      expect(await countEffects(t, keys[i] as string)).toBe(0);
    }
    // The two after it had not run: they ran alone, once.
    for (const i of [3, 4]) {
      expect(settled[i]?.status).toBe("fulfilled");
      expect(await countEffects(t, keys[i] as string)).toBe(1);
    }
    // No key was left claimed: the retry of each runs it, once.
    const rows = new Map((await records(keys)).map((row) => [row.key, row.status]));
    for (const i of [0, 1]) expect(rows.has(keys[i] as string)).toBe(false);
    for (const i of [0, 1]) {
      const key = keys[i] as string;
      await runIdempotent(t.db, operation(key), config);
      expect(await countEffects(t, key)).toBe(1);
    }
  });
});
