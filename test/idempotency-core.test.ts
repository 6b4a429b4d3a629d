import { randomUUID } from "node:crypto";
import { type IdempotencyEvent, recordSchema } from "@exactly-once/idempotency";
import { sql as dsql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, createDb } from "~/server/db/client";
import { DomainError, isDomainError } from "~/server/errors";
import {
  acquire,
  deleteExpiredRecords,
  executeUnderLease,
  fingerprint,
  type IdempotencyConfig,
  type IdempotentOperation,
  runIdempotent,
  serveIdempotent,
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
 * The core, tested through a scratch "effect" table: every execution of an
 * operation writes one row, so rows counted afterwards are effects that happened.
 */
let t: TestDatabase;
const config: IdempotencyConfig = { ttlMs: 60_000, leaseMs: 10_000, waitMs: 5_000 };

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 30 });
  await createEffectTable(t);
});
afterAll(() => t.drop());

const operation = (key: string, overrides: Partial<IdempotentOperation<EffectResult>> = {}) =>
  effectOperation("test.effect", key, overrides);
const effects = (label: string) => countEffects(t, label);

async function record(key: string, scope = "shopper-1") {
  const [row] = await t.sql`
    SELECT status, lease_version, response_body, biz_id FROM idempotency_record
     WHERE user_id = ${scope} AND biz_type = 'test.effect' AND idempotency_key = ${key}`;
  return row;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A promise and the function that settles it: holds an operation inside its execute step. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe("idempotency core", () => {
  it("executes once, then replays the stored result without writing", async () => {
    const key = randomUUID();
    const first = await runIdempotent(t.db, operation(key), config);
    const second = await runIdempotent(t.db, operation(key), config);
    expect(first.replayed).toBe(false);
    expect(second.replayed).toBe(true);
    expect(second.result).toEqual(first.result);
    expect(await effects(key)).toBe(1);
    expect(await record(key)).toMatchObject({ status: "SUCCESS", biz_id: String(first.result.effectId) });
  });

  it("runs 50 concurrent copies on separate connections exactly once", async () => {
    const key = randomUUID();
    const slowOp = operation(key, {
      execute: async (tx) => {
        await sleep(50);
        return writeEffect(tx, key);
      },
    });
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, () => runIdempotent(t.db, slowOp, config)),
    );
    const fulfilled = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    const rejected = results.flatMap((r) => (r.status === "rejected" ? [r.reason] : []));
    expect(rejected.every((e) => isDomainError(e, "REQUEST_IN_PROGRESS"))).toBe(true);
    expect(fulfilled.length).toBeGreaterThan(0);
    expect(new Set(fulfilled.map((r) => r.result.effectId)).size).toBe(1);
    expect(fulfilled.filter((r) => !r.replayed)).toHaveLength(1);
    expect(await effects(key)).toBe(1);
  });

  it("rejects the same key with a different payload and writes nothing", async () => {
    const key = randomUUID();
    await runIdempotent(t.db, operation(key), config);
    const other = operation(key, {
      request: { label: "something else" },
      execute: (tx) => writeEffect(tx, "x"),
    });
    await expect(runIdempotent(t.db, other, config)).rejects.toMatchObject({
      code: "IDEMPOTENCY_KEY_REUSED",
    });
    expect(await effects("x")).toBe(0);
    expect(await effects(key)).toBe(1);
  });

  it("stores a declared business rejection and replays it without executing again", async () => {
    const key = randomUUID();
    let calls = 0;
    const rejecting = operation(key, {
      execute: async (tx) => {
        calls++;
        await writeEffect(tx, key); // rolled back with the rejection
        throw new DomainError("OUT_OF_STOCK", "sold out", { meta: { skuId: "A" } });
      },
    });
    await expect(runIdempotent(t.db, rejecting, config)).rejects.toMatchObject({ code: "OUT_OF_STOCK" });
    const replay = runIdempotent(t.db, rejecting, config);
    await expect(replay).rejects.toMatchObject({
      code: "OUT_OF_STOCK",
      message: "sold out",
      details: { replayed: true, meta: { skuId: "A" } },
    });
    // The replay's execute may have been entered (its statements travel behind the claim and fail with
    // it), but nothing it wrote remains, and the stored rejection is what it answered.
    expect(calls).toBeLessThanOrEqual(2);
    expect(await effects(key)).toBe(0);
    expect(await record(key)).toMatchObject({ status: "FAILED" });
  });

  it("one transaction: sends a duplicate's business statements behind its claim, where they fail with it and leave nothing", async () => {
    const key = randomUUID();
    const entered: string[] = [];
    const op = (label: string) =>
      operation(key, {
        claim: "transaction",
        execute: async (tx) => {
          entered.push(label);
          return writeEffect(tx, label);
        },
      });
    const first = await runIdempotent(t.db, op("first"), config);
    const again = await runIdempotent(t.db, op("again"), config);
    expect(again).toMatchObject({ replayed: true, result: first.result });
    expect(await effects("first")).toBe(1);
    expect(await effects("again")).toBe(0);
    expect(entered[0]).toBe("first");
  });

  it("one transaction: commits the claim with the business writes: nobody sees the key before the COMMIT", async () => {
    const key = randomUUID();
    let seenInside: unknown = "not read";
    await runIdempotent(
      t.db,
      operation(key, {
        claim: "transaction",
        execute: async (tx) => {
          const written = await writeEffect(tx, key);
          // Another connection, mid-transaction: neither the claim nor the effect is visible yet.
          seenInside = await record(key);
          return written;
        },
      }),
      config,
    );
    expect(seenInside).toBeUndefined();
    expect(await record(key)).toMatchObject({ status: "SUCCESS", lease_version: 1 });
  });

  it("releases the key after a transient failure so the retry executes, once", async () => {
    const key = randomUUID();
    let calls = 0;
    const flaky = operation(key, {
      execute: async (tx) => {
        calls++;
        const written = await writeEffect(tx, key);
        if (calls === 1) throw Object.assign(new Error("connection reset"), { code: "ECONNRESET" });
        return written;
      },
    });
    await expect(runIdempotent(t.db, flaky, config)).rejects.toMatchObject({
      code: "SERVICE_UNAVAILABLE",
      details: { retryable: true },
    });
    expect(await record(key)).toBeUndefined();
    expect(await effects(key)).toBe(0);
    const retried = await runIdempotent(t.db, flaky, config);
    expect(retried.replayed).toBe(false);
    expect(calls).toBe(2);
    expect(await effects(key)).toBe(1);
  });

  it("answers REQUEST_IN_PROGRESS when the holder outlasts the wait", async () => {
    const key = randomUUID();
    const held = gate();
    const holder = runIdempotent(
      t.db,
      operation(key, {
        execute: async (tx) => {
          await held.opened;
          return writeEffect(tx, key);
        },
      }),
      config,
    );
    await sleep(100);
    const started = Date.now();
    await expect(runIdempotent(t.db, operation(key), { ...config, waitMs: 300 })).rejects.toMatchObject({
      code: "REQUEST_IN_PROGRESS",
      details: { retryable: true },
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    held.open();
    await holder;
    const replay = await runIdempotent(t.db, operation(key), config);
    expect(replay.replayed).toBe(true);
    expect(await effects(key)).toBe(1);
  });

  it("lets a request take over an expired lease and fences out the stale holder", async () => {
    const key = randomUUID();
    const op = operation(key);
    const short = { ...config, leaseMs: 150 };
    const stale = await acquire(t.db, op, fingerprint(op.bizType, op.request), short);
    if (stale.kind !== "owner") throw new Error("expected to own the key");

    // While the lease is live a duplicate waits (and here gives up).
    await expect(runIdempotent(t.db, op, { ...short, waitMs: 50 })).rejects.toMatchObject({
      code: "REQUEST_IN_PROGRESS",
    });
    await sleep(250);
    const taker = await runIdempotent(t.db, op, short);
    expect(taker.replayed).toBe(false);
    expect((await record(key))?.lease_version).toBe(stale.lease.leaseVersion + 1);

    // The original holder wakes up and tries to commit its business writes.
    await expect(executeUnderLease(t.db, stale.lease, op)).rejects.toMatchObject({
      code: "IDEMPOTENCY_LEASE_LOST",
    });
    expect(await effects(key)).toBe(1);
    expect(await record(key)).toMatchObject({ status: "SUCCESS" });
  });

  it("rolls back a holder whose lease was taken over while its transaction was still open", async () => {
    const key = randomUUID();
    const short = { ...config, leaseMs: 150 };
    const held = gate();
    const slow = runIdempotent(
      t.db,
      operation(key, {
        execute: async (tx) => {
          const written = await writeEffect(tx, key); // inside the open transaction
          await held.opened;
          return written;
        },
      }),
      short,
    );
    await sleep(300);
    const taker = await runIdempotent(t.db, operation(key), short);
    expect(taker.replayed).toBe(false);
    held.open();
    // Its outcome and its COMMIT went out together; the failed store turned the COMMIT into a ROLLBACK.
    await expect(slow).rejects.toMatchObject({ code: "IDEMPOTENCY_LEASE_LOST" });
    expect(await effects(key)).toBe(1);
    expect(await record(key)).toMatchObject({ status: "SUCCESS", biz_id: String(taker.result.effectId) });
  });

  it("a holder refused after its key was taken over answers the taker's outcome, not its own refusal", async () => {
    const key = randomUUID();
    const short = { ...config, leaseMs: 150 };
    const held = gate();
    const slow = runIdempotent(
      t.db,
      operation(key, {
        execute: async () => {
          await held.opened;
          throw new DomainError("OUT_OF_STOCK", "sold out while this holder was slow");
        },
      }),
      short,
    );
    await sleep(300);
    const taker = await runIdempotent(t.db, operation(key), short);
    held.open();
    // One answer per key: the slow holder's refusal was never stored, so it is not what it answers either.
    await expect(slow).resolves.toMatchObject({ replayed: true, result: taker.result });
    expect(await record(key)).toMatchObject({ status: "SUCCESS", biz_id: String(taker.result.effectId) });
  });

  it("a holder refused while the request that took its key over still works is told to retry (lease lost)", async () => {
    const key = randomUUID();
    const short = { ...config, leaseMs: 150 };
    const slowHeld = gate();
    const takerHeld = gate();
    const slow = runIdempotent(
      t.db,
      operation(key, {
        execute: async () => {
          await slowHeld.opened;
          throw new DomainError("OUT_OF_STOCK", "sold out while this holder was slow");
        },
      }),
      short,
    );
    await sleep(300);
    const taker = runIdempotent(
      t.db,
      operation(key, {
        execute: async (tx) => {
          await takerHeld.opened;
          return writeEffect(tx, key);
        },
      }),
      { ...short, leaseMs: 10_000 },
    );
    await expect.poll(async () => (await record(key))?.lease_version).toBe(2);
    slowHeld.open();
    await expect(slow).rejects.toMatchObject({ code: "IDEMPOTENCY_LEASE_LOST" });
    takerHeld.open();
    expect((await taker).replayed).toBe(false);
    expect(await record(key)).toMatchObject({ status: "SUCCESS" });
  });

  it("one transaction: waits for a holder still inside its transaction, however short its lease: no takeover", async () => {
    const key = randomUUID();
    const short = { ...config, leaseMs: 150 };
    const held = gate();
    const slow = runIdempotent(
      t.db,
      operation(key, {
        claim: "transaction",
        execute: async (tx) => {
          const written = await writeEffect(tx, key); // inside the open transaction
          await held.opened;
          return written;
        },
      }),
      short,
    );
    await sleep(300); // the lease has run out; the transaction has not
    const duplicate = runIdempotent(t.db, operation(key, { claim: "transaction" }), short);
    await sleep(200);
    held.open();
    const [first, second] = await Promise.all([slow, duplicate]);
    expect(first.replayed).toBe(false);
    expect(second).toMatchObject({ replayed: true, result: first.result });
    expect(await effects(key)).toBe(1);
  });

  it("one transaction: the claim's lock_timeout ends with the claim: a business statement may wait longer", async () => {
    const key = randomUUID();
    const quick = { ...config, waitMs: 200 };
    const locked = gate();
    const release = gate();
    // Another transaction holds a row the operation writes, for longer than the claim may wait for its key.
    const holder = t.sql.begin(async (sql) => {
      await sql`SELECT 1 FROM sku WHERE id = 'SKU-MUG' FOR UPDATE`;
      locked.open();
      await release.opened;
    });
    await locked.opened;
    setTimeout(() => release.open(), 600);
    const started = Date.now();
    let inside = "";
    const result = await runIdempotent(
      t.db,
      operation(key, {
        claim: "transaction",
        execute: async (tx) => {
          const [setting] = (await tx.execute(
            dsql`SELECT current_setting('lock_timeout') AS value`,
          )) as unknown as {
            value: string;
          }[];
          inside = setting?.value ?? "";
          await tx.execute(dsql`UPDATE sku SET name = name WHERE id = 'SKU-MUG'`);
          return writeEffect(tx, key);
        },
      }),
      quick,
    );
    await holder;
    // The transaction's own setting is back (the pool's: none) before the business statements run.
    expect(inside).toBe("0");
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect(result.replayed).toBe(false);
    expect(await effects(key)).toBe(1);
  });

  it("one transaction: frees the key when its holder's connection dies mid-transaction: the waiting duplicate executes", async () => {
    const config1 = config;
    const key = randomUUID();
    const held = gate();
    let holderPid = 0;
    const doomed = runIdempotent(
      t.db,
      operation(key, {
        claim: "transaction",
        execute: async (tx) => {
          const [row] = await tx.execute<{ pid: number }>(dsql`SELECT pg_backend_pid() AS pid`);
          holderPid = row?.pid ?? 0;
          await writeEffect(tx, key);
          await held.opened;
          return writeEffect(tx, `${key}-never`);
        },
      }),
      config1,
    );
    await sleep(100);
    const duplicate = runIdempotent(t.db, operation(key, { claim: "transaction" }), config1);
    await sleep(100);
    await t.sql`SELECT pg_terminate_backend(${holderPid})`;
    held.open();
    await expect(doomed).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE" });
    const taken = await duplicate;
    expect(taken.replayed).toBe(false);
    expect(await effects(key)).toBe(1);
    expect(await effects(`${key}-never`)).toBe(0);
  });

  it("never hands a connection back inside a transaction, whatever happened on it", async () => {
    const small = await createTestDatabase({ poolSize: 3 });
    try {
      await small.sql`CREATE TABLE effect (id serial PRIMARY KEY, label text NOT NULL)`;
      const run = (op: IdempotentOperation<unknown>) => runIdempotent(small.db, op, config).catch(() => {});
      const key = randomUUID();
      await Promise.all([
        ...Array.from({ length: 10 }, () => run(operation(key))), // one first, the rest replays
        run(operation(key, { request: { label: "other" } })), // payload mismatch
        run(
          operation(randomUUID(), {
            execute: async () => {
              throw new DomainError("OUT_OF_STOCK", "sold out");
            },
          }),
        ),
        run(
          operation(randomUUID(), {
            execute: async () => {
              throw Object.assign(new Error("reset"), { code: "ECONNRESET" });
            },
          }),
        ),
        run(
          operation(randomUUID(), {
            execute: async (tx) => {
              await tx.execute(dsql`SELECT 1 / 0`); // a statement that fails inside the transaction
              return { result: { effectId: 0, label: "never" } };
            },
          }),
        ),
      ]);
      const open = await small.sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'`;
      expect(open[0]?.n).toBe(0);
      // And the pool still works: three connections, twenty more first executions.
      const more = await Promise.all(
        Array.from({ length: 20 }, () => runIdempotent(small.db, operation(randomUUID()), config)),
      );
      expect(more.every((r) => !r.replayed)).toBe(true);
    } finally {
      await small.drop();
    }
  });

  it("runs 60 concurrent copies exactly once on a pool of 4 connections", async () => {
    const tiny = await createTestDatabase({ poolSize: 4 });
    try {
      await tiny.sql`CREATE TABLE effect (id serial PRIMARY KEY, label text NOT NULL)`;
      const key = randomUUID();
      const results = await Promise.all(
        Array.from({ length: 60 }, () => runIdempotent(tiny.db, operation(key), config)),
      );
      expect(results.filter((r) => !r.replayed)).toHaveLength(1);
      expect(new Set(results.map((r) => r.result.effectId)).size).toBe(1);
      const [row] = await tiny.sql<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM effect WHERE label = ${key}`;
      expect(row?.n).toBe(1);
    } finally {
      await tiny.drop();
    }
  });

  it("takes over a lease only once when many duplicates find it expired together", async () => {
    const key = randomUUID();
    const op = operation(key);
    const short = { ...config, leaseMs: 100 };
    await acquire(t.db, op, fingerprint(op.bizType, op.request), short);
    await sleep(200);
    // The crashed holder's lease was short; the duplicates' own leases are not, so the one that takes over
    // keeps the key however slow the machine is (with 100 ms leases they took it from each other under load).
    const results = await Promise.all(Array.from({ length: 20 }, () => runIdempotent(t.db, op, config)));
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    expect(await effects(key)).toBe(1);
  });

  it("scopes keys to the shopper", async () => {
    const key = randomUUID();
    const mine = await runIdempotent(t.db, operation(key), config);
    const theirs = await runIdempotent(
      t.db,
      operation(key, { scope: "shopper-2", request: { label: "theirs" } }),
      config,
    );
    expect(theirs.replayed).toBe(false);
    expect(theirs.result.effectId).not.toBe(mine.result.effectId);
    expect(await effects(key)).toBe(2);
  });

  it("lets an expired key be used again and cleans expired records in batches", async () => {
    const key = randomUUID();
    const tiny = { ...config, ttlMs: 50 };
    await runIdempotent(t.db, operation(key), tiny);
    await sleep(100);
    const again = await runIdempotent(t.db, operation(key, { request: { label: "new payload" } }), config);
    expect(again.replayed).toBe(false);

    await t.sql`DELETE FROM idempotency_record`;
    for (let i = 0; i < 25; i++) await runIdempotent(t.db, operation(`expired-${i}-${key}`), tiny);
    const live = `live-${key}`;
    await runIdempotent(t.db, operation(live), config);
    // A holder whose key expired but whose lease is live is left alone.
    const holder = operation(`held-${key}`);
    await acquire(t.db, holder, fingerprint(holder.bizType, holder.request), { ...config, ttlMs: 1 });
    await sleep(100);

    expect(await deleteExpiredRecords(t.db, { batchSize: 10 })).toBe(25);
    const left = await t.sql<{ idempotency_key: string }[]>`SELECT idempotency_key FROM idempotency_record`;
    expect(left.map((r) => r.idempotency_key).sort()).toEqual([`held-${key}`, live].sort());
  });

  it("fails closed when the record cannot be written", async () => {
    const down = createDb("postgres://postgres:password@127.0.0.1:1/nowhere", { max: 1 });
    let executed = false;
    try {
      await expect(
        runIdempotent(
          down,
          operation(randomUUID(), {
            execute: async (tx) => {
              executed = true;
              return writeEffect(tx, "never");
            },
          }),
          config,
        ),
      ).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE", details: { retryable: true } });
    } finally {
      await closeDb(down);
    }
    expect(executed).toBe(false);
  });
});

describe("one request from its text (serveIdempotent): what the observer is told", () => {
  const observed = () => {
    const events: IdempotencyEvent[] = [];
    return { events, config: { ...config, observe: (event: IdempotencyEvent) => events.push(event) } };
  };
  const ref = (key: string) => ({ scope: "shopper-1", bizType: "test.effect", key });
  const render = (result: { result: EffectResult }) => ({ rendering: result.result, chars: 0 });

  it("a request refused before it reached its key (not valid, not admitted) is not an outcome under it", async () => {
    const key = randomUUID();
    const { events, config: told } = observed();
    const invalid = new DomainError("INVALID_INPUT", "items: required");
    await expect(
      serveIdempotent(t.db, { ...ref(key), operation: async () => Promise.reject(invalid), render }, told),
    ).rejects.toBe(invalid);
    expect(events).toEqual([]);
    expect(await record(key)).toBeUndefined();
  });

  it("a run whose rendering fails is told as it answered (first), not as a key freed; its effect stays", async () => {
    const key = randomUUID();
    const { events, config: told } = observed();
    const broken = () => {
      throw new Error("the resource does not parse");
    };
    await expect(
      serveIdempotent(t.db, { ...ref(key), operation: async () => operation(key), render: broken }, told),
    ).rejects.toThrow("the resource does not parse");
    expect(events.map((event) => event.outcome)).toEqual(["first"]);
    expect(await effects(key)).toBe(1);
    expect(await record(key)).toMatchObject({ status: "SUCCESS" });
  });

  it("refuses a request read under another key than it came with, and runs nothing", async () => {
    const key = randomUUID();
    await expect(
      serveIdempotent(
        t.db,
        { ...ref(key), operation: async () => operation(`${key}-other`), render },
        config,
      ),
    ).rejects.toThrow("under another key");
    expect(await effects(key)).toBe(0);
    expect(await effects(`${key}-other`)).toBe(0);
  });
});

describe("the core's own schema (packages/idempotency/src/schema.ts) and the app's migrated table", () => {
  const shape = async (table: string) => ({
    columns: await t.sql`
      SELECT column_name, data_type, is_nullable, column_default IS NOT NULL AS has_default, is_identity
        FROM information_schema.columns WHERE table_name = ${table} ORDER BY column_name`,
    keys: (
      await t.sql<{ def: string }[]>`
        SELECT regexp_replace(pg_get_constraintdef(oid), '\\s+', ' ', 'g') AS def FROM pg_constraint
         WHERE conrelid = ${table}::regclass AND contype IN ('p', 'u', 'c') ORDER BY contype, def`
    ).map((r) => r.def),
    uniqueIndexes: (
      await t.sql<{ def: string }[]>`
        SELECT regexp_replace(indexdef, '^.* USING ', '') AS def FROM pg_indexes
         WHERE tablename = ${table} AND indexdef LIKE 'CREATE UNIQUE%' ORDER BY def`
    ).map((r) => r.def),
  });

  it("agree column by column, key by key: an app that mounts the core with recordSchema gets this table", async () => {
    await t.sql.unsafe(recordSchema({ table: "core_record", storeOutcome: "core_record_store_outcome" }));
    const core = await shape("core_record");
    const app = await shape("idempotency_record");
    expect(core.columns).toEqual(app.columns);
    expect(core.uniqueIndexes).toEqual(app.uniqueIndexes);
    // The app's constraints are named by its migrations; what they say is the same.
    expect(core.keys.filter((k) => !k.startsWith("CHECK"))).toEqual(
      app.keys.filter((k) => !k.startsWith("CHECK")),
    );
    expect(core.keys.some((k) => /CHECK .*PROCESSING.*SUCCESS.*FAILED/.test(k))).toBe(true);
  });
});
