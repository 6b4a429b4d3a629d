import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWorkerProcess } from "../scripts/lib/worker-process";
import { type AppServer, startAppServer, TEST_SERVER_ADMIN_TOKEN } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/** Every periodic task, by the name its runs are counted and logged under (src/server/merchant-jobs.ts). */
const TASKS = [
  "reconciliation",
  "alert log",
  "idempotency cleanup",
  "payment status query",
  "order payment timeout",
];
/** Each task due often, so a second of running shows every one of them. */
const OFTEN = {
  IDEMPOTENCY_CLEANUP_INTERVAL_MS: "300",
  PAYMENT_QUERY_INTERVAL_MS: "300",
  ORDER_TIMEOUT_INTERVAL_MS: "300",
};

let t: TestDatabase;
const servers: AppServer[] = [];
beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 2 });
});
afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  await t.drop();
});

/** An expired key of its own: a cleanup that ran deletes it. */
async function expiredKey(): Promise<string> {
  const key = `expired-${Math.random().toString(36).slice(2)}`;
  await t.sql`
    INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, response_body, expires_at)
    VALUES ('background-test', 'order.create', ${key}, 'f', 'SUCCESS', '{}'::json, now() - interval '1 hour')`;
  return key;
}
const stillThere = async (key: string) =>
  (await t.sql`SELECT 1 FROM idempotency_record WHERE idempotency_key = ${key}`).length === 1;

/** The tasks whose runs an instance's /api/metrics counts, by name. */
async function tasksRun(server: AppServer): Promise<string[]> {
  const metrics = await fetch(`${server.baseUrl}/api/metrics`, {
    headers: { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` },
  });
  const text = await metrics.text();
  const names = [
    ...text.matchAll(/^checkout_background_task_runs_total\{task="([^"]+)",ok="true"\} [1-9]/gm),
  ];
  return [...new Set(names.map((m) => m[1] ?? ""))].sort();
}

describe("background work runs in the worker, not beside the requests", () => {
  it("an app instance of the production path (WORKER_IN_APP=false) runs none of the periodic tasks", async () => {
    const key = await expiredKey();
    const server = await startAppServer({ databaseUrl: t.url, env: { ...OFTEN, WORKER_IN_APP: "false" } });
    servers.push(server);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await tasksRun(server)).toEqual([]);
    // Its cleanup is due every 300 ms, yet the expired key is still there: no instance deletes it.
    expect(await stillThere(key)).toBe(true);
  });

  it("an instance that hosts the worker (WORKER_IN_APP=true, the demo) runs every one, each measured", async () => {
    const key = await expiredKey();
    const server = await startAppServer({ databaseUrl: t.url, env: { ...OFTEN, WORKER_IN_APP: "true" } });
    servers.push(server);
    await expect.poll(() => tasksRun(server), { timeout: 20_000, interval: 250 }).toEqual([...TASKS].sort());
    await expect.poll(() => stillThere(key), { timeout: 10_000 }).toBe(false);
    const metrics = await (
      await fetch(`${server.baseUrl}/api/metrics`, {
        headers: { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` },
      })
    ).text();
    expect(metrics).toMatch(/^checkout_background_task_cpu_seconds_total\{task="reconciliation"\} \d/m);
    expect(metrics).toMatch(/^checkout_background_task_seconds_total\{task="idempotency cleanup"\} \d/m);
  });

  it("`npm run worker` runs every periodic task, each run logged with its time and CPU", async () => {
    const worker = startWorkerProcess({ DATABASE_URL: t.url, ...OFTEN });
    const tasks = () => [...new Set(worker.runs.filter((r) => r.ok).map((r) => r.task))].sort();
    try {
      await expect.poll(tasks, { timeout: 30_000, interval: 250 }).toEqual([...TASKS].sort());
      for (const run of worker.runs) {
        expect(run.ms).toBeGreaterThanOrEqual(0);
        expect(run.cpuMs).toBeGreaterThanOrEqual(0);
      }
    } finally {
      await worker.stop();
    }
  });
});
