import { randomUUID } from "node:crypto";
import type autocannon from "autocannon";
import { startWorkerProcess, type TaskRun } from "../../worker-process";
import type { Bench } from "../bench";
import { combine, orderLoad, restToken, run } from "../load";
import { DURATION, log, ROUNDS, tiny } from "../settings";

/**
 * Replays over REST with and without every periodic task running (issue 44: background work never takes the
 * request path's CPU). The bench's app instance is the production path's (`WORKER_IN_APP=false`): it serves the
 * requests and nothing else. Rounds take turns: quiet (the worker held still), then busy (`npm run worker` on
 * the same database, every task due every second, a "Reconcile now" and expired keys to delete made before the
 * round). Each busy round prints which tasks ran during it, how often, for how long and with what CPU.
 */
/**
 * How often each periodic task is due in a busy round: ten times the status query's and the payment timeout's
 * default, sixty times the cleanup's, so every task runs in every round, several times.
 */
const BUSY_EVERY_MS = 1_000;
/** Expired keys made before each busy round, for its cleanup. */
const EXPIRED_PER_ROUND = tiny ? 2_000 : 20_000;

export async function backgroundWork(bench: Bench) {
  const { app, db, add, total, meter } = bench;
  const rest = await restToken(app.baseUrl);
  const transport = { kind: "rest" as const, token: rest.token };
  const count = tiny ? 200 : 3_000;
  const keys = Array.from({ length: count }, () => randomUUID());
  log(`background work: ${count} orders over REST, then their replays with and without the worker's tasks`);
  const { duration: _, ...placing } = orderLoad(app.baseUrl, transport, keys, 0, null);
  await run({ ...placing, amount: count });
  const quiet = { runs: [] as autocannon.Result[], cpu: meter() };
  const busy = { runs: [] as autocannon.Result[], cpu: meter() };
  const ran: TaskRun[][] = [];
  // One worker for every round, held still (SIGSTOP) in the quiet ones: its start is not measured, and each
  // busy round begins with every task overdue.
  const worker = await startBusyWorker(bench.url);
  try {
    for (let round = 0; round < ROUNDS; round++) {
      worker.child.kill("SIGSTOP");
      quiet.runs.push(
        await quiet.cpu.measure(
          () => run({ ...orderLoad(app.baseUrl, transport, keys, 0, null), duration: DURATION / ROUNDS }),
          total,
        ),
      );
      // Work for the round: expired keys of another shopper to delete in the cleanup's bounded batches, and a
      // "Reconcile now" (a full run).
      await db.$client`
        INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, response_body, expires_at)
        SELECT 'bench-expired', 'order.create', ${`${round}-`} || g, 'f', 'SUCCESS', '{}'::json, now() - interval '1 hour'
          FROM generate_series(1, ${EXPIRED_PER_ROUND}) g`;
      await db.$client`INSERT INTO reconciliation_request (id) VALUES (1) ON CONFLICT (id) DO NOTHING`;
      const from = Date.now();
      worker.child.kill("SIGCONT");
      busy.runs.push(
        await busy.cpu.measure(
          () => run({ ...orderLoad(app.baseUrl, transport, keys, 0, null), duration: DURATION / ROUNDS }),
          total,
        ),
      );
      const to = Date.now();
      const during = worker.runs.filter((r) => r.at >= from && r.at - r.ms <= to);
      ran.push(during);
      log(`  busy round ${round + 1}: ${describeRuns(during)}`);
    }
  } finally {
    worker.child.kill("SIGCONT");
    await worker.stop();
  }
  const after = await db.$client<{ n: number }[]>`
    SELECT count(*)::int AS n FROM orders WHERE user_id = ${rest.userId}`;
  const tasks = new Set(ran.flat().map((r) => r.task));
  for (const [id, scenario, side] of [
    ["background-quiet", "replay over REST, no periodic task running", quiet],
    ["background-busy", "replay over REST, every periodic task running in the worker", busy],
  ] as const) {
    const result = combine(side.runs);
    add(
      id,
      scenario,
      result,
      id === "background-busy"
        ? `${after[0]?.n ?? 0} orders for ${count} keys; tasks seen running: ${[...tasks].sort().join(", ") || "none"}`
        : `${after[0]?.n ?? 0} orders for ${count} keys`,
      (after[0]?.n ?? 0) === count,
      side.cpu,
      undefined,
      side.runs,
    );
  }
}

/** Each task's runs in a round: how many, their time, and the worker's CPU meanwhile. */
function describeRuns(runs: TaskRun[]): string {
  if (runs.length === 0) return "no task ran";
  const byTask = new Map<string, { n: number; ms: number; cpuMs: number }>();
  for (const r of runs) {
    const t = byTask.get(r.task) ?? { n: 0, ms: 0, cpuMs: 0 };
    t.n++;
    t.ms += r.ms;
    t.cpuMs += r.cpuMs;
    byTask.set(r.task, t);
  }
  return [...byTask]
    .map(([task, t]) => `${task} ×${t.n} (${Math.round(t.ms)} ms, CPU ${Math.round(t.cpuMs)} ms)`)
    .join("; ");
}

/**
 * `npm run worker` on the bench's database with every periodic task due every `BUSY_EVERY_MS`; resolved once it
 * has run one of them.
 */
async function startBusyWorker(databaseUrl: string): Promise<ReturnType<typeof startWorkerProcess>> {
  const worker = startWorkerProcess({
    DATABASE_URL: databaseUrl,
    IDEMPOTENCY_CLEANUP_INTERVAL_MS: String(BUSY_EVERY_MS),
    PAYMENT_QUERY_INTERVAL_MS: String(BUSY_EVERY_MS),
    ORDER_TIMEOUT_INTERVAL_MS: String(BUSY_EVERY_MS),
  });
  const deadline = Date.now() + 30_000;
  while (worker.runs.length === 0) {
    if (worker.child.exitCode !== null || Date.now() > deadline) {
      await worker.stop();
      throw new Error("the bench's worker ran no periodic task within 30 s");
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return worker;
}
