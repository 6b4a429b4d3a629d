import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppContext } from "~/server/app-context";
import { lastReconciliation, reconcile } from "~/server/reconciliation/reconcile";
import { testAppContext } from "./support/app-context";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { startPgProxy } from "./support/pg-proxy";
import { placePaidOrder } from "./support/scenarios";

/** `npm run worker`, twice at once, as separate processes against one database. */
let t: TestDatabase;
let app: AppContext;
const workers: ChildProcess[] = [];
const TSX = createRequire(import.meta.url).resolve("tsx/cli");

beforeAll(async () => {
  t = await createTestDatabase();
  app = testAppContext(t.db);
});
async function stopAllWorkers() {
  await Promise.all(
    workers.map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (worker.exitCode !== null || worker.signalCode !== null) return resolve();
          worker.once("exit", () => resolve());
          worker.kill("SIGTERM");
          setTimeout(() => worker.kill("SIGKILL"), 5_000).unref();
        }),
    ),
  );
}
afterAll(async () => {
  await stopAllWorkers();
  await t.drop();
});

function startWorkerProcess(env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, [TSX, "scripts/worker.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: t.url,
      OUTBOX_RELAY_INTERVAL_MS: "50",
      WORKER_CONCURRENCY: "2",
      LOG_LEVEL: "warn",
      ...env,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  workers.push(child);
  return child;
}

describe("separate worker processes", () => {
  it("fulfil every paid order exactly once when two run at once, and stop on SIGTERM", async () => {
    startWorkerProcess();
    startWorkerProcess();
    const paid = await Promise.all(
      Array.from({ length: 6 }, () => placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }])),
    );
    const ids = paid.map((p) => p.orderId);
    await expect
      .poll(
        async () =>
          (
            await t.sql`SELECT count(*)::int AS n FROM orders WHERE id = ANY(${ids}::uuid[]) AND status = 'SHIPPED'`
          )[0]?.n,
        { timeout: 30_000, interval: 250 },
      )
      .toBe(ids.length);
    const [effects] = await t.sql`
      SELECT (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ANY(${ids}::uuid[])) AS deductions,
             (SELECT count(*)::int FROM benefit_grant WHERE order_id = ANY(${ids}::uuid[])) AS grants,
             (SELECT count(*)::int FROM shipment WHERE order_id = ANY(${ids}::uuid[])) AS shipments`;
    expect(effects).toEqual({ deductions: 6, grants: 12, shipments: 6 });
    expect((await reconcile(t.db)).ok).toBe(true);
    // Each worker tried to claim the period's reconciliation at start: one ran it for both, and kept it.
    await expect.poll(async () => (await lastReconciliation(t.db))?.ok, { timeout: 30_000 }).toBe(true);
    const kept = await t.sql<
      { ok: boolean }[]
    >`SELECT ok FROM reconciliation_report WHERE checked_at IS NOT NULL`;
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.every((report) => report.ok)).toBe(true);

    const [first] = workers;
    const exited = new Promise<number | null>((resolve) => first?.once("exit", (code) => resolve(code)));
    first?.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  it("a live worker keeps a job that runs longer than the dead-worker window (its heartbeat vouches for it)", async () => {
    await stopAllWorkers();
    startWorkerProcess({ WORKER_HEARTBEAT_MS: "200" }); // dead after 5 silent beats: 1 s
    // The stock consumer will wait on this row lock for longer than that.
    const blocker = await t.db.$client.reserve();
    try {
      await blocker`BEGIN`;
      await blocker`SELECT id FROM sku WHERE id = 'SKU-GRINDER' FOR NO KEY UPDATE`; // what UPDATE sku takes; order lines' foreign keys still pass
      const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-GRINDER", quantity: 1 }]);
      const lockedJob = async () =>
        (
          await t.sql<{ locked_by: string | null; locked_at: Date | null }[]>`
            SELECT locked_by, locked_at FROM graphile_worker._private_jobs j
             WHERE j.key LIKE '%:stock' AND locked_by IS NOT NULL`
        )[0];
      await expect.poll(lockedJob, { timeout: 15_000, interval: 100 }).toBeDefined();
      const before = await lockedJob();
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      // Not unlocked and fetched again: the same lock, and a fresh heartbeat under the id it was taken with.
      expect(await lockedJob()).toEqual(before);
      const [beat] = await t.sql`
        SELECT count(*)::int AS n FROM worker_heartbeat
         WHERE worker_id = ${before?.locked_by ?? ""} AND beat_at > now() - interval '1 second'`;
      expect(beat?.n).toBe(1);
      await blocker`COMMIT`;
      await expect
        .poll(async () => (await t.sql`SELECT status FROM orders WHERE id = ${orderId}`)[0]?.status, {
          timeout: 20_000,
          interval: 200,
        })
        .toBe("SHIPPED");
    } finally {
      await blocker`ROLLBACK`.catch(() => {});
      blocker.release();
    }
  });

  it("a worker killed right after a consumer committed: another takes its locked job within seconds, effects once", async () => {
    await stopAllWorkers();
    const crashing = startWorkerProcess({ FAULT_CONSUMER_CRASH_RATE: "1", WORKER_HEARTBEAT_MS: "200" });
    // tsx runs the script in a child process and reports its SIGKILL as exit code 137.
    const died = new Promise<string>((resolve) =>
      crashing.once("exit", (code, signal) => resolve(signal ?? String(code))),
    );
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
    expect(["SIGKILL", "137"]).toContain(await died);
    // The dead worker's job is still locked by it: graphile-worker alone would leave it for four hours.
    const [locked] =
      await t.sql`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE locked_by IS NOT NULL`;
    expect(locked?.n).toBeGreaterThan(0);

    startWorkerProcess({ WORKER_HEARTBEAT_MS: "200" });
    await expect
      .poll(async () => (await t.sql`SELECT status FROM orders WHERE id = ${orderId}`)[0]?.status, {
        timeout: 20_000,
        interval: 200,
      })
      .toBe("SHIPPED");
    await expect
      .poll(async () => (await t.sql`SELECT count(*)::int AS n FROM graphile_worker._private_jobs`)[0]?.n, {
        timeout: 20_000,
        interval: 200,
      })
      .toBe(0);
    const [effects] = await t.sql`
      SELECT (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ${orderId}) AS deductions,
             (SELECT count(*)::int FROM benefit_grant WHERE order_id = ${orderId}) AS grants,
             (SELECT count(*)::int FROM shipment WHERE order_id = ${orderId}) AS shipments,
             (SELECT count(*)::int FROM message_consume_record r JOIN outbox_event e ON e.id = r.event_id
               WHERE e.aggregate_id = ${orderId}::text AND r.status = 'DONE') AS consumed`;
    expect(effects).toEqual({ deductions: 1, grants: 2, shipments: 1, consumed: 3 });
    expect((await reconcile(t.db)).ok).toBe(true);
  });

  it("a worker whose every connection hangs (a failover that leaves its sessions open) exits, and its restart fulfils the orders", {
    timeout: 120_000,
  }, async () => {
    await stopAllWorkers();
    const proxy = await startPgProxy(t.url);
    const exits: (number | null)[] = [];
    // The supervisor: a worker that exits is started again, as systemd or the chaos run's cluster would.
    let supervising = true;
    const supervise = (): ChildProcess => {
      // Two connections in its pool: once both hang, nothing of the process reaches the database any more.
      const child = startWorkerProcess({
        DATABASE_URL: proxy.url,
        DB_POOL_MAX: "2",
        WORKER_HEARTBEAT_MS: "200",
        WORKER_STALL_MS: "1500",
      });
      child.once("exit", (code) => {
        exits.push(code);
        if (supervising) supervise();
      });
      return child;
    };
    try {
      supervise();
      const shipped = async (ids: string[]) =>
        (
          await t.sql`SELECT count(*)::int AS n FROM orders WHERE id = ANY(${ids}::uuid[]) AND status = 'SHIPPED'`
        )[0]?.n;
      const first = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
      await expect.poll(() => shipped([first.orderId]), { timeout: 30_000, interval: 200 }).toBe(1);
      expect(proxy.freezeAll()).toBeGreaterThan(0);
      const later = await Promise.all(
        Array.from({ length: 4 }, () => placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }])),
      );
      const ids = later.map((order) => order.orderId);
      await expect.poll(() => shipped(ids), { timeout: 60_000, interval: 250 }).toBe(ids.length);
      // New job runners could not help (its database pool hung too): it exited for the supervisor.
      expect(exits).toContain(70);
      const [effects] = await t.sql`
        SELECT (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ANY(${ids}::uuid[])) AS deductions,
               (SELECT count(*)::int FROM shipment WHERE order_id = ANY(${ids}::uuid[])) AS shipments`;
      expect(effects).toEqual({ deductions: 4, shipments: 4 });
    } finally {
      supervising = false;
      await stopAllWorkers();
      await proxy.close();
    }
  });
});
