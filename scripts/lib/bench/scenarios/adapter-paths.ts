import { randomUUID } from "node:crypto";
import type autocannon from "autocannon";
import type { Bench } from "../bench";
import { type BenchServer, FRAMEWORKS, redisAnswers, serverMeter, startAdapter, startPeer } from "../floor";
import { combine, latencyCurveOf, orderLoad, peakRssMb, run } from "../load";
import { sideDatabase } from "../peer-database";
import { DURATION, FRAMEWORKS_CHOSEN, log, ROUNDS, STORM, tiny, WARMUP } from "../settings";

/** Each side replays its most recent keys, as many as this (a retry comes soon after its first execution). */
const REPLAY_KEYS = 5_000;

interface Side {
  id: string;
  scenario: string;
  server: BenchServer;
  db: Awaited<ReturnType<typeof sideDatabase>>;
  cpu: ReturnType<typeof serverMeter>;
  runs: autocannon.Result[];
  sent: { count: number };
}

/**
 * The package's adapters beside the peer in the same framework (`npm run bench -- --adapters`): for Express,
 * Fastify and Hono, ours (./adapter-server.ts: the adapter, the record in the order's transaction) and
 * @node-idempotency with Redis (./peer-server.ts) place the same order, each on a database of its own, in
 * interleaved rounds of first executions, then of replays of each side's recent keys; then `STORM` copies of one
 * key at once reach ours: one order, one answer, no 409. Skipped, with the reason, when no Redis answers.
 */
export async function adapterPaths(bench: Bench) {
  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  if (!(await redisAnswers(redisUrl))) {
    log(`adapters skipped: no Redis answers at ${redisUrl} (@node-idempotency keeps its records there)`);
    return;
  }
  // --tiny proves the scenario runs (CI): one framework (test/adapter-examples.test.ts checks each adapter).
  const chosen = FRAMEWORKS_CHOSEN ?? (tiny ? FRAMEWORKS.slice(0, 1) : FRAMEWORKS);
  const unknown = chosen.filter((f) => !(FRAMEWORKS as readonly string[]).includes(f));
  if (unknown.length > 0) throw new Error(`--frameworks: no adapter for ${unknown.join(", ")}`);
  for (const framework of chosen) {
    const side = async (who: "ours" | "peer"): Promise<Side> => {
      const db = await sideDatabase(bench.url, `${who}_${framework}`);
      bench.cleanups.unshift(db.drop);
      const server =
        who === "ours" ? await startAdapter(db.url, framework) : await startPeer(db.url, redisUrl, framework);
      bench.cleanups.unshift(() => server.stop());
      return {
        id: who === "ours" ? `adapter-${framework}` : `adapter-peer-${framework}`,
        scenario:
          who === "ours"
            ? `adapter: ${framework}, @exactly-once/idempotency`
            : `adapter: ${framework}, @node-idempotency + Redis`,
        server,
        db,
        cpu: serverMeter(server),
        runs: [],
        sent: { count: 0 },
      };
    };
    const sides = [await side("ours"), await side("peer")];
    log(
      `adapters, ${framework}: warm-up ${WARMUP}s each, then ${ROUNDS} interleaved rounds of first executions`,
    );
    for (const s of sides) {
      const warmKeys = Array.from({ length: 50_000 }, () => randomUUID());
      await run({ ...orderLoad(s.server.baseUrl, { kind: "peer" }, warmKeys, 0, null), duration: WARMUP });
    }
    // The warm-up ends with the tables analyzed, as in a shop past its first minutes: a generic plan made while a
    // table was a page or two scans it (the record's UPDATE by primary key among them) until autovacuum analyzes it
    // again, and the rounds would measure the database's first minute, not the adapter.
    for (const s of sides) await s.db.sql.unsafe("ANALYZE");
    const ordersOf = (s: Side) =>
      `SELECT count(*)::int AS n FROM orders WHERE user_id = '${s.server.userId}'`;
    const before = await Promise.all(sides.map((s) => s.db.settled(ordersOf(s))));
    await rounds(bench, sides, () => Array.from({ length: 100_000 }, () => randomUUID()));
    const created: number[] = [];
    for (const [i, s] of sides.entries()) {
      const result = combine(s.runs);
      const all = await s.db.settled(ordersOf(s));
      created.push(all);
      const orders = all - (before[i] ?? 0);
      bench.add(
        `${s.id}-first`,
        `${s.scenario}: first execution`,
        result,
        `${orders} orders for ${result["2xx"]} answered / ${s.sent.count} sent`,
        orders >= result["2xx"] && orders <= s.sent.count,
        s.cpu,
        s.server.child,
        s.runs,
      );
    }

    log(`adapters, ${framework}: ${ROUNDS} interleaved rounds of replays`);
    const recent = await Promise.all(
      sides.map(async (s) =>
        (
          await s.db.sql<{ request_id: string }[]>`
            SELECT request_id FROM orders WHERE user_id = ${s.server.userId}
             ORDER BY created_at DESC LIMIT ${REPLAY_KEYS}`
        ).map((r) => r.request_id),
      ),
    );
    for (const s of sides) {
      s.runs = [];
      s.cpu = serverMeter(s.server);
    }
    await rounds(bench, sides, (i) => recent[i] ?? []);
    for (const [i, s] of sides.entries()) {
      const result = combine(s.runs);
      const after = await s.db.settled(ordersOf(s));
      bench.add(
        `${s.id}-replay`,
        `${s.scenario}: replay`,
        result,
        `${after - (created[i] ?? 0)} new orders (must be 0)`,
        after === created[i],
        s.cpu,
        s.server.child,
        s.runs,
      );
    }
    const ours = sides[0];
    if (ours) await storm(bench, framework, ours);
    for (const s of sides) await s.server.stop();
  }
}

/** The sides take turns in short rounds, so drift on a shared machine hits them alike. */
async function rounds(bench: Bench, sides: Side[], keysOf: (side: number) => string[]): Promise<void> {
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, s] of sides.entries()) {
      const keys = keysOf(i);
      s.runs.push(
        await s.cpu.measure(
          () =>
            run({
              ...orderLoad(s.server.baseUrl, { kind: "peer" }, keys, 0, s.sent),
              duration: DURATION / ROUNDS,
            }),
          bench.total,
        ),
      );
    }
  }
}

/** `STORM` copies of one key at once: one order, one answer, and no 409 (the copies wait, then replay). */
async function storm(bench: Bench, framework: string, ours: Side): Promise<void> {
  const key = randomUUID();
  const started = Date.now();
  const latencies: number[] = [];
  const cpu = serverMeter(ours.server);
  const answers = await cpu.measure(
    () =>
      Promise.all(
        Array.from({ length: STORM }, async () => {
          const t0 = performance.now();
          const response = await fetch(`${ours.server.baseUrl}/orders`, {
            method: "POST",
            headers: { "content-type": "application/json", "idempotency-key": key },
            body: JSON.stringify({ requestId: key, items: [{ skuId: "SKU-MUG", quantity: 1 }] }),
          });
          const text = await response.text();
          latencies.push(performance.now() - t0);
          return { status: response.status, text };
        }),
      ),
    () => STORM,
  );
  const seconds = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const orders = await ours.db.count(`SELECT count(*)::int AS n FROM orders WHERE request_id = '${key}'`);
  const bodies = new Set(answers.map((a) => a.text));
  const conflicts = answers.filter((a) => a.status === 409).length;
  bench.rows.push({
    id: `adapter-${framework}-storm`,
    scenario: `adapter: ${framework}, duplicate storm (${STORM})`,
    requestsPerSec: Math.round(STORM / seconds),
    ...cpu.perRequest(),
    p50Ms: Math.round(latencies[Math.floor(latencies.length * 0.5)] ?? 0),
    p99Ms: Math.round(latencies[Math.floor(latencies.length * 0.99)] ?? 0),
    latency: latencyCurveOf(latencies),
    peakRssMb: peakRssMb(ours.server.child),
    correctness: `${orders} order, ${bodies.size} distinct answer(s), ${conflicts} × 409`,
    ok: orders === 1 && bodies.size === 1 && answers.every((a) => a.status === 201),
  });
}
