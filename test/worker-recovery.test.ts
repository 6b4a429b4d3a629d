import type { Runner } from "graphile-worker";
import pino from "pino";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import { type RunningWorker, startWorker, type WorkerOptions } from "~/server/fulfilment/worker";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { type PgProxy, startPgProxy } from "./support/pg-proxy";
import { placePaidOrder } from "./support/scenarios";

/**
 * The event worker in chaos: connections dropped under it, and graphile-worker's own
 * pool shutting itself down (what it does when it cannot record a job's outcome after
 * its retries). Jobs queued meanwhile must still run.
 */
const mug = [{ skuId: "SKU-MUG", quantity: 1 }];

async function shippedCount(database: TestDatabase, ids: string[]) {
  return (
    await database.sql`SELECT count(*)::int AS n FROM orders WHERE id = ANY(${ids}::uuid[]) AND status = 'SHIPPED'`
  )[0]?.n;
}

/** The worker's LISTEN backends, other than those already dropped. */
async function listeners(database: TestDatabase, dropped: Set<number>) {
  const rows = await database.sql<{ pid: number }[]>`
    SELECT pid FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'
       AND pid <> ALL(${[...dropped]}::int[])`;
  return rows.map((row) => row.pid);
}

/** Places a paid order and waits until the worker has shipped it (30 s at most). */
async function shipsOne(app: Parameters<typeof placePaidOrder>[0], database: TestDatabase) {
  const first = await placePaidOrder(app, mug);
  await expect.poll(() => shippedCount(database, [first.orderId]), { timeout: 30_000 }).toBe(1);
}

/** Waits (10 s at most) until the worker has a job runner other than `hung`. */
const replaced = (worker: RunningWorker, hung: Runner | undefined) =>
  expect
    .poll(() => worker.currentRunner() !== undefined && worker.currentRunner() !== hung, { timeout: 10_000 })
    .toBe(true);

/**
 * An event worker that polls, relays and beats fast, so a test sees recovery within seconds; its queue
 * connections go where `overrides.connectionString` says (a proxy that can freeze them), its consumers'
 * through the test's own pool.
 */
const quickWorker = (database: TestDatabase, overrides: Partial<WorkerOptions> = {}) =>
  startWorker(database.db, {
    connectionString: database.url,
    concurrency: 2,
    relayIntervalMs: 50,
    pollIntervalMs: 200,
    heartbeatMs: 200,
    log: pino({ level: process.env.WORKER_TEST_LOG ?? "silent" }),
    ...overrides,
  });

describe("the event worker", () => {
  test("replaces a job runner that stopped by itself, and runs the jobs queued meanwhile", async ({
    app,
    database,
  }) => {
    const worker = await quickWorker(database);
    try {
      const first = await placePaidOrder(app, mug);
      await expect.poll(() => shippedCount(database, [first.orderId]), { timeout: 20_000 }).toBe(1);

      // The pool ends behind the worker's back, as graphile-worker's "queue is in an inconsistent state" does.
      const dying = worker.currentRunner();
      await dying?.stop("simulated: could not completeJobs");
      const later = await Promise.all(Array.from({ length: 4 }, () => placePaidOrder(app, mug)));
      const ids = later.map((order) => order.orderId);
      await expect
        .poll(() => shippedCount(database, ids), { timeout: 30_000, interval: 250 })
        .toBe(ids.length);
      expect(worker.currentRunner()).toBeDefined();
      expect(worker.currentRunner()).not.toBe(dying);
    } finally {
      await worker.stop();
    }
  });

  test("goes on after every connection, the LISTEN one included, is dropped while jobs are queued", {
    timeout: 180_000,
  }, async ({ app, database }) => {
    const worker = await quickWorker(database);
    try {
      const orders = await Promise.all(Array.from({ length: 6 }, () => placePaidOrder(app, mug)));
      // Backends already told to end: one can linger in pg_stat_activity for a moment after its drop.
      const dropped = new Set<number>();
      for (let drop = 0; drop < 3; drop++) {
        // The worker takes its LISTEN connection again after a backoff: wait until it has (a backend not
        // dropped before), so that every drop really cuts it. A drop that found nothing to cut would prove
        // nothing, and under load 150 ms was not always enough for anything to reconnect. graphile-worker's
        // backoff grows to 60 s when drops keep landing before its LISTEN completes.
        await expect
          .poll(() => listeners(database, dropped), { timeout: 65_000, interval: 50 })
          .not.toEqual([]);
        // Chosen first, then terminated: in a WHERE clause the termination could run before `pid <> pg_backend_pid()`.
        const cut = await database.sql<{ pid: number; listening: boolean }[]>`
          WITH chosen AS MATERIALIZED (
            SELECT pid, query ILIKE 'LISTEN%' AS listening FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> ALL(${[...dropped]}::int[]))
          SELECT pid, listening FROM chosen WHERE pg_terminate_backend(pid)`;
        for (const { pid } of cut) dropped.add(pid);
        expect(cut.some((backend) => backend.listening)).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
      const more = await Promise.all(Array.from({ length: 3 }, () => placePaidOrder(app, mug)));
      const ids = [...orders, ...more].map((order) => order.orderId);
      await expect
        .poll(() => shippedCount(database, ids), { timeout: 40_000, interval: 250 })
        .toBe(ids.length);
      const [effects] = await database.sql`
        SELECT (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ANY(${ids}::uuid[])) AS deductions,
               (SELECT count(*)::int FROM shipment WHERE order_id = ANY(${ids}::uuid[])) AS shipments`;
      expect(effects).toEqual({ deductions: ids.length, shipments: ids.length });
    } finally {
      await worker.stop();
    }
  });

  // How a runner hangs while jobs are queued: all its connections, or one worker's poll while the other goes on.
  const hangs = [
    [
      "whose connections hang (a failover that leaves its sessions open)",
      (proxy: PgProxy) => expect(proxy.freezeAll()).toBeGreaterThan(0),
    ],
    [
      // Without a limit on a poll's wait, the hung worker was never noticed: jobs still finished (the other
      // worker took them), and the runner went on at half its concurrency for good, its silent connection held.
      "one of whose polls hangs while its other worker goes on taking jobs",
      async (proxy: PgProxy) => {
        proxy.freezeOn("get_job");
        await expect.poll(() => proxy.frozenOn, { timeout: 10_000 }).toBe(1);
      },
    ],
  ] as const;
  // Its own budget: its polls (30 s + 45 s + 10 s) must fail with what they saw before the test's time runs out.
  test.for(hangs)(
    "replaces a job runner %s, and runs the jobs queued meanwhile",
    {
      timeout: 120_000,
    },
    async ([, hang], { app, database }) => {
      // The queue's connections go through a proxy that can freeze them; the consumers' own pool does not.
      const proxy = await startPgProxy(database.url);
      const worker = await quickWorker(database, { connectionString: proxy.url, stallMs: 1_500 });
      try {
        await shipsOne(app, database);
        const hung = worker.currentRunner();
        await hang(proxy);
        const later = await Promise.all(Array.from({ length: 4 }, () => placePaidOrder(app, mug)));
        const ids = later.map((order) => order.orderId);
        await expect
          .poll(() => shippedCount(database, ids), { timeout: 45_000, interval: 250 })
          .toBe(ids.length);
        // The jobs can run before the hung runner is replaced: when freezeAll found fewer idle connections than
        // workers, one worker hung and the other went on with a new connection (CI saw it). The hung poll then
        // has the runner replaced.
        await replaced(worker, hung);
      } finally {
        await worker.stop();
        await proxy.close();
      }
    },
  );

  test("stop() returns when the job runner's connections hang (it is not waited for past stopTimeoutMs)", {
    timeout: 60_000,
  }, async ({ app, database }) => {
    const proxy = await startPgProxy(database.url);
    // Not replaced while the test looks: the hung runner is the one stop() must deal with.
    const worker = await quickWorker(database, {
      connectionString: proxy.url,
      stallMs: 60_000,
      stopTimeoutMs: 500,
    });
    try {
      await shipsOne(app, database);
      expect(proxy.freezeAll()).toBeGreaterThan(0);
      const started = Date.now();
      await worker.stop();
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await proxy.close();
    }
  });

  test("a new job runner slower to start than the stall period is given its time, not replaced again and again", {
    timeout: 120_000,
  }, async ({ app, database }) => {
    const proxy = await startPgProxy(database.url);
    const replacements: string[] = [];
    const log = pino(
      { level: "error" },
      {
        write: (line: string) => {
          if (line.includes("replacing its job runner")) replacements.push(line);
        },
      },
    );
    const worker = await quickWorker(database, {
      connectionString: proxy.url,
      pollIntervalMs: 100,
      stallMs: 400,
      log,
    });
    try {
      await shipsOne(app, database);
      // Its connections hang; the new runner's take 1.5 s each to open, far past the 0.4 s stall period.
      proxy.slowConnects(1_500);
      expect(proxy.freezeAll()).toBeGreaterThan(0);
      const later = await placePaidOrder(app, mug);
      await expect
        .poll(() => shippedCount(database, [later.orderId]), { timeout: 45_000, interval: 250 })
        .toBe(1);
      // One replacement: the hung runner, by whichever sign of its hang came first (its last job finished just
      // before the freeze, so its hung poll may show before the silence does). The new one, still opening its
      // connections, is given its time: not replaced again and again, each replacement leaving a pool behind.
      expect(replacements.map((l) => JSON.parse(l).why)).toEqual([
        expect.stringMatching(
          /^(no job finished and no poll answered for \d+ s|a poll for jobs has waited \d+ s)$/,
        ),
      ]);
    } finally {
      await worker.stop();
      await proxy.close();
    }
  });

  test("with no worker taking jobs, a job due for over a minute raises an alert (liveness seen from outside)", async ({
    app,
    database,
  }) => {
    const figures = async () => alertsFrom(await opsFigures(app.db)).map((alert) => alert.name);
    expect(await figures()).not.toContain("worker_stalled");
    await database.sql`SELECT graphile_worker.add_job('consume-event', '{}'::json, run_at := now() - interval '2 minutes',
                                                     job_key := 'liveness-probe')`;
    try {
      expect(await figures()).toContain("worker_stalled");
    } finally {
      await database.sql`SELECT graphile_worker.remove_job('liveness-probe')`;
    }
  });
});
