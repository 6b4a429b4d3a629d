import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DomainError } from "~/server/errors";
import {
  DEFAULT_REPLAY_CACHE_OPTIONS,
  deleteExpiredRecords,
  type IdempotencyConfig,
  type IdempotentOperation,
  ReplayCache,
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
 * The replay cache (docs/idempotency.md, "The replay cache"): each instance answers replays of
 * outcomes it knows from memory, never past the key's expiry, and waits in memory for a key it
 * is already running instead of taking a connection.
 */
let t: TestDatabase;
const base: IdempotencyConfig = { ttlMs: 60_000, leaseMs: 10_000, waitMs: 5_000 };
/** An app instance: its own cache. */
const instance = (overrides: Partial<IdempotencyConfig> = {}, margin = 2_000): IdempotencyConfig => ({
  ...base,
  cache: new ReplayCache({
    ...DEFAULT_REPLAY_CACHE_OPTIONS,
    maxEntries: 1_000,
    maxChars: 1_000_000,
    marginMs: margin,
  }),
  ...overrides,
});

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 4 });
  await createEffectTable(t);
});
afterAll(() => t.drop());

const operation = (key: string, overrides: Partial<IdempotentOperation<EffectResult>> = {}) =>
  effectOperation("test.cached", key, overrides);
const effects = (label: string) => countEffects(t, label);

/** Changes what the database would replay, so an answer that still says "first" came from memory. */
async function rewriteStored(key: string) {
  await t.sql`UPDATE idempotency_record SET response_body = '{"at":"database"}'::json
               WHERE idempotency_key = ${key}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("replay cache", () => {
  it("answers a replay from memory, the first answer's bytes, and a changed payload is still refused", async () => {
    const a = instance();
    const key = randomUUID();
    const first = await runIdempotent(t.db, operation(key), a);
    await rewriteStored(key);
    const again = await runIdempotent(t.db, operation(key), a);
    expect(again.replayed).toBe(true);
    expect(JSON.stringify(again.result)).toBe(JSON.stringify(first.result));
    expect(again.keyExpiresAt).toEqual(first.keyExpiresAt);
    await expect(
      runIdempotent(t.db, operation(key, { request: { label: "other" } }), a),
    ).rejects.toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    expect(await effects(key)).toBe(1);
  });

  it("keeps stored refusals too", async () => {
    const a = instance();
    const key = randomUUID();
    const refusing = operation(key, {
      execute: async () => {
        throw new DomainError("OUT_OF_STOCK", "sold out");
      },
    });
    await expect(runIdempotent(t.db, refusing, a)).rejects.toMatchObject({ code: "OUT_OF_STOCK" });
    await t.sql`DELETE FROM idempotency_record WHERE idempotency_key = ${key}`;
    await expect(runIdempotent(t.db, refusing, a)).rejects.toMatchObject({
      code: "OUT_OF_STOCK",
      details: { replayed: true },
    });
  });

  it("another instance reads the database once, then answers from its own memory", async () => {
    const a = instance();
    const b = instance();
    const key = randomUUID();
    const first = await runIdempotent(t.db, operation(key), a);
    const fromDatabase = await runIdempotent(t.db, operation(key), b);
    expect(fromDatabase).toMatchObject({ replayed: true, result: first.result });
    await rewriteStored(key);
    expect((await runIdempotent(t.db, operation(key), b)).result).toEqual(first.result);
    // Without a cache the database's (rewritten) answer is what comes back: the test can tell them apart.
    expect((await runIdempotent(t.db, operation(key), base)).result).toEqual({ at: "database" });
  });

  it("never answers for a key that expired: after cleanup the next request executes again", async () => {
    const a = instance({ ttlMs: 600 }, 200);
    const key = randomUUID();
    await runIdempotent(t.db, operation(key), a);
    expect((await runIdempotent(t.db, operation(key), a)).replayed).toBe(true);
    await sleep(700);
    expect(await deleteExpiredRecords(t.db)).toBeGreaterThanOrEqual(1);
    const afterExpiry = await runIdempotent(t.db, operation(key, { request: { label: "new" } }), a);
    expect(afterExpiry.replayed).toBe(false);
    expect(await effects(key)).toBe(2);
  });

  it("stops serving an entry a margin before the key expires, even if nobody cleaned it up", async () => {
    const a = instance({ ttlMs: 1_000 }, 800);
    const key = randomUUID();
    await runIdempotent(t.db, operation(key), a);
    await rewriteStored(key);
    await sleep(300); // past ttl − margin, before the key expires: the database answers
    expect((await runIdempotent(t.db, operation(key), a)).result).toEqual({ at: "database" });
  });

  it("a storm of one key waits in memory: other keys still get connections while it runs", async () => {
    const a = instance();
    const key = randomUUID();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow = operation(key, {
      execute: async (tx) => {
        const written = await writeEffect(tx, key);
        await held;
        return written;
      },
    });
    // The pool has 4 connections; 40 copies of the held key would take all of them without the cache.
    const storm = Array.from({ length: 40 }, () => runIdempotent(t.db, slow, a));
    await sleep(100);
    const other = await runIdempotent(t.db, operation(randomUUID()), a);
    expect(other.replayed).toBe(false);
    release();
    const answers = await Promise.all(storm);
    expect(answers.filter((answer) => !answer.replayed)).toHaveLength(1);
    expect(new Set(answers.map((answer) => JSON.stringify(answer.result))).size).toBe(1);
    expect(await effects(key)).toBe(1);
  });

  it("when the running copy fails for a passing reason, the waiting copies run it again, once", async () => {
    const a = instance();
    const key = randomUUID();
    let calls = 0;
    const flaky = operation(key, {
      execute: async (tx) => {
        calls++;
        await sleep(50);
        if (calls === 1) throw Object.assign(new Error("connection reset"), { code: "ECONNRESET" });
        return writeEffect(tx, key);
      },
    });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => runIdempotent(t.db, flaky, a)));
    expect(results.filter((r) => r.status === "rejected")).toHaveLength(1);
    expect(await effects(key)).toBe(1);
  });
});
