import { randomUUID } from "node:crypto";
import { deleteExpiredRecords } from "~/server/idempotency";
import type { Bench } from "../bench";
import { orderLoad, restToken, run } from "../load";
import { DURATION, log, tiny } from "../settings";

/** How many orders and idempotency records the tables are filled with (issue 27: a million each). */
export const MILLION = tiny ? 20_000 : 1_000_000;
/** Shoppers the loaded rows belong to (a shard of a real shop holds many). */
const SHOPPERS = tiny ? 200 : 10_000;

/**
 * 13: cost as the tables grow. First executions over REST are measured on the bench's database as the rounds
 * left it, then again once MILLION orders and MILLION idempotency records (made over the last 48 hours under a
 * 24-hour TTL: half of them, a day of keys, expired) are loaded in bulk by SQL (not through the API); then a
 * third time while the idempotency cleanup deletes that day of expired keys, its batches beside the writers
 * (`FOR UPDATE SKIP LOCKED`, 500 at a time): how long it takes, and the writers' p99 meanwhile.
 */
export async function millionRows(bench: Bench) {
  const { app, db, meter, add } = bench;
  const seconds = Math.max(1, DURATION / 2);
  const { token } = await restToken(app.baseUrl);
  const measure = async (
    id: string,
    scenario: string,
    correctness: string,
    beside?: () => Promise<string>,
  ) => {
    const keys = Array.from({ length: 50_000 }, () => randomUUID());
    const cpu = meter();
    let said = correctness;
    const result = await cpu.measure(async () => {
      // Started together: the load's window is the first `seconds` of whatever runs beside it.
      const [answered] = await Promise.all([
        run({ ...orderLoad(app.baseUrl, { kind: "rest", token }, keys, 0, null), duration: seconds }),
        beside?.().then((text) => {
          said = text;
        }),
      ]);
      return answered;
    }, bench.total);
    add(id, scenario, result, `${said}${said ? "; " : ""}${result["2xx"]} orders answered`, true, cpu);
  };

  log(
    `13. cost as the tables grow: first executions, then ${MILLION.toLocaleString("en")} orders and records`,
  );
  await measure("scale-before", "13 first execution, REST, before the bulk load", "");

  const started = Date.now();
  // Rows as the app writes them, spread over SHOPPERS shoppers and the last 48 hours; closed orders (the
  // timeout job has nothing to do with them), successful records of which the older half has expired.
  await db.$client.unsafe(`
    INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, discount_cents, currency, status,
                        created_at, updated_at)
    SELECT 'bulk-' || (i % ${SHOPPERS}), 'bulk-' || i, 'bulk', 1250, 0, 'USD', 'CLOSED',
           now() - i * ${172_800 / MILLION} * interval '1 second', now()
      FROM generate_series(1, ${MILLION}) AS i`);
  await db.$client.unsafe(`
    INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, response_body, biz_id,
                                    created_at, updated_at, expires_at)
    SELECT 'bulk-' || (i % ${SHOPPERS}), 'order.create', 'bulk-' || i, 'bulk', 'SUCCESS',
           '{"orderId":"bulk","status":"CLOSED","amountCents":1250,"currency":"USD"}'::json, 'bulk',
           now() - i * ${172_800 / MILLION} * interval '1 second', now() - i * ${172_800 / MILLION} * interval '1 second',
           now() + interval '24 hours' - i * ${172_800 / MILLION} * interval '1 second'
      FROM generate_series(1, ${MILLION}) AS i`);
  // Tables as they stand in a shop that has run a while: vacuumed, analysed, checkpointed. Measured straight
  // after the load, autovacuum and the checkpointer were working through it (database CPU per order 0.44 →
  // 1.42 ms, all of it theirs).
  await db.$client.unsafe("VACUUM (ANALYZE) orders");
  await db.$client.unsafe("VACUUM (ANALYZE) idempotency_record");
  await db.$client.unsafe("CHECKPOINT");
  const loadedS = (Date.now() - started) / 1000;
  const [expired] = await db.$client<{ n: number }[]>`
    SELECT count(*)::int AS n FROM idempotency_record WHERE expires_at <= now()`;
  log(`loaded in ${loadedS.toFixed(1)} s; ${expired?.n ?? 0} records expired`);

  await measure(
    "scale-after",
    `13 first execution, REST, with ${MILLION.toLocaleString("en")} orders and records`,
    `loaded in ${loadedS.toFixed(1)} s`,
  );

  await measure(
    "scale-cleanup",
    "13 first execution, REST, while the cleanup deletes a day of expired keys",
    "",
    async () => {
      const t0 = Date.now();
      let deleted = 0;
      for (;;) {
        const n = await deleteExpiredRecords(db);
        deleted += n;
        if (n === 0) break;
      }
      const took = (Date.now() - t0) / 1000;
      log(`cleanup: ${deleted} expired records deleted in ${took.toFixed(1)} s`);
      const window = took > seconds ? ` (the load ran for its first ${seconds} s)` : "";
      return `cleanup deleted ${deleted} expired records (${expired?.n ?? 0} at load time) in ${took.toFixed(1)} s${window}`;
    },
  );
}
