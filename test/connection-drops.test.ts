import { randomUUID } from "node:crypto";
import type { ClaimKind } from "@exactly-once/idempotency";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type IdempotencyConfig, runIdempotent } from "~/server/operations";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { createEffectTable, effectOperation } from "./support/effects";

/**
 * The idempotency core while PostgreSQL drops every connection of the app again and again (what the
 * chaos run does twice per run, here about sixty times in a few seconds). Clients keep their key and
 * retry as a shopper's browser does, three copies of each request at once. Afterwards every key has
 * at most one effect, every key that was answered has exactly one, all its answers agree, and no
 * one-transaction claim exists outside its transaction.
 *
 * This found two faults: the driver bug behind the one-transaction claim committed on its own (see
 * patches/postgres+3.4.9.patch, "released-after-close": 7 to 22 such claims in 20 s runs unpatched),
 * and the pool's reconnect backoff growing to 20 s after repeated drops (see reconnectDelay).
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 20 });
  await createEffectTable(t);
});
afterAll(() => t.drop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The drops go on for this long at least, and until ANSWERED_AT_LEAST keys were answered (at most MAX_RUN_MS). */
const RUN_MS = 6_000;
const ANSWERED_AT_LEAST = 40;
const MAX_RUN_MS = 30_000;

async function dropConnectionsWhileShopping(config: IdempotencyConfig, claim: ClaimKind) {
  const started = Date.now();
  const until = started + RUN_MS;
  // However busy the machine (another test file beside this one), enough keys are asked while connections drop.
  const running = () =>
    Date.now() < until || (answers.size < ANSWERED_AT_LEAST && Date.now() < started + MAX_RUN_MS);
  // A key asked before the end is asked again for up to 3 s after it.
  let stoppedAt: number | undefined;
  const stillAsking = () => {
    if (running()) return true;
    stoppedAt ??= Date.now();
    return Date.now() < stoppedAt + 3_000;
  };
  const answers = new Map<string, string[]>();
  let drops = 0;
  let slowest = 0;
  const failures = new Map<string, number>();
  const client = async () => {
    while (running()) {
      const key = randomUUID();
      const op = effectOperation("test.drops", key, { claim });
      // The same key until it is answered (or the run ends), three copies at a time.
      while (!answers.has(key) && stillAsking()) {
        const settled = await Promise.allSettled(
          [1, 2, 3].map(async () => {
            const asked = Date.now();
            try {
              return await runIdempotent(t.db, op, config);
            } finally {
              slowest = Math.max(slowest, Date.now() - asked);
            }
          }),
        );
        for (const s of settled)
          if (s.status === "rejected") {
            const code = String((s.reason as { code?: string }).code);
            failures.set(code, (failures.get(code) ?? 0) + 1);
          }
        const ok = settled.flatMap((s) => (s.status === "fulfilled" ? [JSON.stringify(s.value.result)] : []));
        if (ok.length > 0) answers.set(key, ok);
        else await sleep(20);
      }
    }
  };
  const dropper = async () => {
    while (running()) {
      await sleep(150 + Math.random() * 150);
      const [row] = await t.sql<{ n: number }[]>`
        SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      drops += row?.n ?? 0;
    }
  };
  await Promise.all([dropper(), ...Array.from({ length: 8 }, client)]);
  return { answers, drops, slowest, failures: Object.fromEntries(failures) };
}

async function effectsPerKey() {
  const rows = await t.sql<
    { label: string; n: number }[]
  >`SELECT label, count(*)::int AS n FROM effect GROUP BY label`;
  return new Map(rows.map((r) => [r.label, r.n]));
}

describe("the idempotency core while every connection is dropped again and again", () => {
  for (const claim of ["transaction", "lease"] as const) {
    it(`claimed ${claim === "transaction" ? "in the business transaction" : "with a lease"}: one effect per key, one answer per key`, async () => {
      await t.sql`TRUNCATE effect`;
      await t.sql`DELETE FROM idempotency_record WHERE biz_type = 'test.drops'`;
      const config: IdempotencyConfig = { ttlMs: 60_000, leaseMs: 500, waitMs: 2_000 };
      const { answers, drops, slowest, failures } = await dropConnectionsWhileShopping(config, claim);
      const effects = await effectsPerKey();
      expect(drops).toBeGreaterThan(20);
      // What a client may be told while the database is away: try again, never an internal error.
      const allowed = ["SERVICE_UNAVAILABLE", "REQUEST_IN_PROGRESS", "IDEMPOTENCY_LEASE_LOST"];
      expect(Object.keys(failures).filter((code) => !allowed.includes(code))).toEqual([]);
      expect(answers.size).toBeGreaterThan(30);
      // Every call answers within its wait and a reconnect or two. With postgres.js's default backoff the
      // pool's connections waited up to 20 s before reconnecting after such drops, and calls took 19 s.
      expect(slowest).toBeLessThan(6_000);
      expect([...effects.values()].filter((n) => n > 1)).toEqual([]);
      for (const [key, said] of answers) {
        expect(effects.get(key), key).toBe(1);
        expect(new Set(said).size, key).toBe(1);
      }
      if (claim === "transaction") {
        const claims = await t.sql`
          SELECT idempotency_key FROM idempotency_record WHERE biz_type = 'test.drops' AND status = 'PROCESSING'`;
        expect(claims).toEqual([]);
      }
    }, 60_000);
  }
});
