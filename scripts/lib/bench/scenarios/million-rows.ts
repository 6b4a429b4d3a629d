import { randomUUID } from "node:crypto";
import type autocannon from "autocannon";
import { deleteExpiredRecords } from "~/server/operations";
import { CpuMeter, processCpuMs } from "../../cpu";
import type { Bench } from "../bench";
import { combine, orderLoad, restToken, run, startApp } from "../load";
import { sideDatabase } from "../peer-database";
import { DURATION, log, ROUNDS, tiny, WARMUP } from "../settings";

/** How many orders and idempotency records the tables are filled with (issue 27: a million each). */
export const MILLION = tiny ? 20_000 : 1_000_000;
/** Shoppers the loaded rows belong to (a shard of a real shop holds many). */
const SHOPPERS = tiny ? 200 : 10_000;

/**
 * 13: cost as the tables grow. Two databases beside the bench's, each with an app instance of its own: one
 * empty, one filled with MILLION orders and MILLION idempotency records (made over the last 48 hours under a
 * 24-hour TTL: half of them, a day of keys, expired), loaded in bulk by SQL (not through the API). First
 * executions over REST take turns on the two in ROUNDS interleaved rounds, as the ratios to the peer do: one
 * measurement before the load and one after it, seconds apart, moved with the machine (a run once measured the
 * load generator's own CPU per order 0.15 ms before and 0.34 after, on the same work). Then, on the filled one,
 * first executions while the idempotency cleanup deletes that day of expired keys, its batches beside the
 * writers (`FOR UPDATE SKIP LOCKED`, 500 at a time): how long it takes, and the writers' p99 meanwhile.
 */
export async function millionRows(bench: Bench) {
  const { add, cleanups, url } = bench;
  log(
    `13. cost as the tables grow: first executions on an empty database and on one of ${MILLION.toLocaleString("en")} orders and records, ${ROUNDS} interleaved rounds`,
  );
  const empty = await sideDatabase(url, "scale_empty");
  cleanups.unshift(() => empty.drop());
  const filled = await sideDatabase(url, "scale_filled");
  cleanups.unshift(() => filled.drop());
  const loadedS = await fill(filled.sql);
  const [expired] = await filled.sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM idempotency_record WHERE expires_at <= now()`;
  log(`loaded in ${loadedS.toFixed(1)} s; ${expired?.n ?? 0} records expired`);

  const sides = await Promise.all(
    [
      { id: "scale-before", scenario: "13 first execution, REST, empty database", db: empty },
      {
        id: "scale-after",
        scenario: `13 first execution, REST, with ${MILLION.toLocaleString("en")} orders and records`,
        db: filled,
      },
    ].map(async (side) => {
      const app = await startApp(side.db.url);
      cleanups.unshift(() => app.stop());
      const { token } = await restToken(app.baseUrl);
      return {
        ...side,
        app,
        token,
        cpu: new CpuMeter(() => processCpuMs(app.child.pid)),
        runs: [] as autocannon.Result[],
      };
    }),
  );
  const load = (side: (typeof sides)[number], duration: number) =>
    run({
      ...orderLoad(side.app.baseUrl, { kind: "rest", token: side.token }, freshKeys(), 0, null),
      duration,
    });
  // Both instances are new: warmed up alike before the rounds.
  for (const side of sides) await load(side, WARMUP);
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of sides) {
      side.runs.push(await side.cpu.measure(() => load(side, DURATION / ROUNDS), bench.total));
    }
  }
  for (const side of sides) {
    const result = combine(side.runs);
    add(
      side.id,
      side.scenario,
      result,
      `${side.id === "scale-after" ? `loaded in ${loadedS.toFixed(1)} s; ` : ""}${result["2xx"]} orders answered`,
      true,
      side.cpu,
      side.app.child,
      side.runs,
    );
  }

  const [, full] = sides;
  if (!full) return;
  const seconds = Math.max(1, DURATION / 2);
  const cleanupCpu = new CpuMeter(() => processCpuMs(full.app.child.pid));
  let said = "";
  const result = await cleanupCpu.measure(async () => {
    // Started together: the load's window is the first `seconds` of the cleanup.
    const [answered] = await Promise.all([
      load(full, seconds),
      (async () => {
        const t0 = Date.now();
        let deleted = 0;
        for (;;) {
          const n = await deleteExpiredRecords(filled.db);
          deleted += n;
          if (n === 0) break;
        }
        const took = (Date.now() - t0) / 1000;
        log(`cleanup: ${deleted} expired records deleted in ${took.toFixed(1)} s`);
        const window = took > seconds ? ` (the load ran for its first ${seconds} s)` : "";
        said = `cleanup deleted ${deleted} expired records (${expired?.n ?? 0} at load time) in ${took.toFixed(1)} s${window}`;
      })(),
    ]);
    return answered;
  }, bench.total);
  add(
    "scale-cleanup",
    "13 first execution, REST, while the cleanup deletes a day of expired keys",
    result,
    `${said}; ${result["2xx"]} orders answered`,
    true,
    cleanupCpu,
    full.app.child,
  );
  // Its instances and databases go now, not at the bench's end: autovacuum working through half a million deleted
  // records, and the instances' periodic tasks, would otherwise run beside the scenarios after it and slow them.
  for (const side of sides) await side.app.stop();
  await filled.drop();
  await empty.drop();
}

const freshKeys = () => Array.from({ length: 50_000 }, () => randomUUID());

/**
 * Rows as the app writes them, spread over SHOPPERS shoppers and the last 48 hours: closed orders (the timeout
 * job has nothing to do with them), successful records of which the older half has expired. Then the tables
 * as they stand in a shop that has run a while: vacuumed, analysed, checkpointed (measured straight after the
 * load, autovacuum and the checkpointer were working through it: database CPU per order 0.44 → 1.42 ms, all of
 * it theirs). Returns how long it took, in seconds.
 */
async function fill(sql: Awaited<ReturnType<typeof sideDatabase>>["sql"]): Promise<number> {
  const started = Date.now();
  await sql.unsafe(`
    INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, discount_cents, currency, status,
                        created_at, updated_at)
    SELECT 'bulk-' || (i % ${SHOPPERS}), 'bulk-' || i, 'bulk', 1250, 0, 'USD', 'CLOSED',
           now() - i * ${172_800 / MILLION} * interval '1 second', now()
      FROM generate_series(1, ${MILLION}) AS i`);
  await sql.unsafe(`
    INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, response_body, biz_id,
                                    created_at, updated_at, expires_at)
    SELECT 'bulk-' || (i % ${SHOPPERS}), 'order.create', 'bulk-' || i, 'bulk', 'SUCCESS',
           '{"orderId":"bulk","status":"CLOSED","amountCents":1250,"currency":"USD"}'::json, 'bulk',
           now() - i * ${172_800 / MILLION} * interval '1 second', now() - i * ${172_800 / MILLION} * interval '1 second',
           now() + interval '24 hours' - i * ${172_800 / MILLION} * interval '1 second'
      FROM generate_series(1, ${MILLION}) AS i`);
  await sql.unsafe("VACUUM (ANALYZE) orders");
  await sql.unsafe("VACUUM (ANALYZE) idempotency_record");
  await sql.unsafe("CHECKPOINT");
  return (Date.now() - started) / 1000;
}
