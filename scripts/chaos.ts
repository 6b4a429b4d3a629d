/**
 * `npm run chaos`: a seeded simulation of many shoppers against two app
 * instances and a worker process while faults are injected, then a wait for the
 * system to settle and a check of every invariant. Exits 1 on any violation,
 * listing it, and keeps the failing seed in chaos/regressions.json.
 *   --seed=N          the plan (default 1)
 *   --shoppers=N      shoppers (default 200)
 *   --concurrency=N   shoppers at a time (default 20)
 *   --crash-rate=P    probability the worker dies right after a consumer committed (default 0.03)
 *   --regressions     run every seed kept in chaos/regressions.json instead
 *   --with-regressions  the run above, then every kept seed (what CI does)
 *   --keep            keep the run's database (with DATABASE_URL; the embedded server is removed anyway)
 * Process logs go to chaos-results/seed-N/.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getEnv } from "~/env";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { CATALOGUE, seedCatalogue } from "~/server/db/seed";
import { ensureBuild } from "./lib/build";
import { checkInvariants, settle, stallReport } from "./lib/chaos/checks";
import { Cluster } from "./lib/chaos/cluster";
import { startOperator } from "./lib/chaos/operator";
import { Faults, Invariants, printReport } from "./lib/chaos/report";
import { runShopper, type ShopperRecord } from "./lib/chaos/shopper";
import { startThrowawayPostgres } from "./lib/embedded-postgres";
import { exitWith } from "./lib/exit";

const REGRESSIONS = "chaos/regressions.json";
/** Each run's process logs (gitignored). */
const RESULTS = "chaos-results";

interface RunPlan {
  seed: number;
  shoppers: number;
  concurrency: number;
  crashRate: number;
}

interface Regression extends RunPlan {
  note: string;
}

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, "").split("=");
    return [k ?? "", v ?? "true"] as const;
  }),
);
const log = (m: string) => console.log(`[chaos] ${m}`);

/** The events of a run that hit the whole system, at fixed points of its progress. */
const SYSTEM_FAULTS: { at: number; fault: "kill A" | "kill B" | "drop connections" | "pause worker" }[] = [
  { at: 0.15, fault: "kill A" },
  { at: 0.25, fault: "pause worker" },
  { at: 0.35, fault: "drop connections" },
  { at: 0.55, fault: "kill B" },
  { at: 0.65, fault: "pause worker" },
  { at: 0.75, fault: "drop connections" },
];
const SYSTEM_FAULT_NAMES = {
  "kill A": "app instance killed (SIGKILL) and restarted",
  "kill B": "app instance killed (SIGKILL) and restarted",
  "drop connections": "all database connections dropped",
  "pause worker": "worker paused 4 s (events queue; refunds land before fulfilment)",
} as const;

interface RunSummary {
  plan: RunPlan;
  faults: [string, number][];
  checks: { name: string; checked: number; violations: string[] }[];
}

async function runOnce(plan: RunPlan, adminUrl: string): Promise<RunSummary> {
  log(
    `seed ${plan.seed}: ${plan.shoppers} shoppers, ${plan.concurrency} at a time, worker crash rate ${plan.crashRate}`,
  );
  const dbName = `checkout_chaos_${plan.seed}_${Date.now()}`;
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${dbName}`);
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  const databaseUrl = url.toString();
  await runMigrations(databaseUrl);
  const db = createDb(databaseUrl, { max: 4 });
  await seedCatalogue(db);
  // One product runs short, so some orders are refused and some paid ones cannot be filled (auto refund).
  const scarce = Math.max(2, Math.floor(plan.shoppers / 8));
  await db.$client`UPDATE sku SET stock = ${scarce}, initial_stock = ${scarce} WHERE id = 'SKU-GRINDER'`;

  const faults = new Faults();
  const logDir = path.join(RESULTS, `seed-${plan.seed}`);
  rmSync(logDir, { recursive: true, force: true });
  mkdirSync(logDir, { recursive: true });
  const cluster = new Cluster({ databaseUrl, consumerCrashRate: plan.crashRate, log, logDir });
  const records: ShopperRecord[] = [];
  const started = Date.now();
  let stopOperator = async () => {};
  try {
    await cluster.start();
    stopOperator = startOperator(db, cluster, faults);
    const skuIds = CATALOGUE.map((item) => item.id);
    let next = 0;
    let finished = 0;
    const pending = [...SYSTEM_FAULTS];
    const systemFaults: Promise<unknown>[] = [];
    const onFinished = () => {
      finished++;
      while (pending[0] && finished / plan.shoppers >= pending[0].at) {
        const { fault } = pending.shift() as (typeof SYSTEM_FAULTS)[number];
        faults.count(SYSTEM_FAULT_NAMES[fault]);
        systemFaults.push(
          fault === "drop connections"
            ? cluster.dropDatabaseConnections()
            : fault === "pause worker"
              ? cluster.pauseWorker(4_000)
              : cluster.killApp(fault === "kill A" ? 0 : 1, 1_500),
        );
      }
    };
    await Promise.all(
      Array.from({ length: plan.concurrency }, async () => {
        while (next < plan.shoppers) {
          const index = next++;
          records.push(await runShopper({ seed: plan.seed, cluster, faults, skuIds }, index));
          onFinished();
        }
      }),
    );
    await Promise.all(systemFaults);
    log(`shoppers done in ${((Date.now() - started) / 1000).toFixed(1)} s; waiting for the system to settle`);
    const settled = await settle(db, 120_000);
    await stopOperator();
    log(settled.ok ? `settled in ${settled.seconds.toFixed(1)} s` : `did not settle: ${settled.detail}`);
    if (!settled.ok)
      for (const line of await stallReport(db).catch((e: unknown) => [String(e)])) log(`  ${line}`);
    faults.count("worker killed right after a consumer committed (restarted)", cluster.workerCrashes);

    const invariants = new Invariants();
    if (!settled.ok) invariants.check("the system settles within 120 s", 1, [settled.detail]);
    await checkInvariants(db, records, invariants);
    printReport(faults, invariants, (line) => log(line));
    const ok = invariants.violationCount === 0;
    log(
      ok
        ? `seed ${plan.seed}: no violation`
        : `seed ${plan.seed}: ${invariants.violationCount} violation(s) — kept in ${REGRESSIONS}`,
    );
    if (!ok) keepRegression(plan, invariants);
    return { plan, faults: faults.entries(), checks: invariants.checks };
  } finally {
    await stopOperator();
    await cluster.stop().catch(() => {});
    await closeDb(db);
    if (args.has("keep")) log(`database kept: ${databaseUrl}`);
    else await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}

function readRegressions(): Regression[] {
  if (!existsSync(REGRESSIONS)) return [];
  return (JSON.parse(readFileSync(REGRESSIONS, "utf8")) as { seeds: Regression[] }).seeds;
}

function keepRegression(plan: RunPlan, invariants: Invariants): void {
  const seeds = readRegressions();
  if (seeds.some((s) => s.seed === plan.seed && s.shoppers === plan.shoppers)) return;
  const failed = invariants.checks.filter((c) => c.violations.length > 0).map((c) => c.name);
  seeds.push({ ...plan, note: `failed ${new Date().toISOString().slice(0, 10)}: ${failed.join("; ")}` });
  writeFileSync(REGRESSIONS, `${JSON.stringify({ seeds }, null, 2)}\n`);
}

async function main() {
  const env = getEnv();
  await ensureBuild(log);
  const base: RunPlan = {
    seed: Number(args.get("seed") ?? 1),
    shoppers: Number(args.get("shoppers") ?? 200),
    concurrency: Number(args.get("concurrency") ?? 20),
    crashRate: Number(args.get("crash-rate") ?? 0.03),
  };
  const plans = args.has("regressions")
    ? readRegressions()
    : args.has("with-regressions")
      ? [base, ...readRegressions().filter((r) => r.seed !== base.seed || r.shoppers !== base.shoppers)]
      : [base];
  if (plans.length === 0) log(`no seeds in ${REGRESSIONS} yet`);
  let adminUrl = env.DATABASE_URL;
  let stopServer = async () => {};
  if (!adminUrl) {
    const server = await startThrowawayPostgres("checkout-chaos-pg", ["-c", "max_connections=300"]);
    adminUrl = server.adminUrl;
    stopServer = server.stop;
  }
  const runs: RunSummary[] = [];
  try {
    for (const plan of plans) runs.push(await runOnce(plan, adminUrl));
  } finally {
    await stopServer();
  }
  const failures = runs.filter((run) => run.checks.some((c) => c.violations.length > 0)).length;
  // One row per invariant and run, in the shape CI's totals read (.ci/totals.mjs).
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    path.join(RESULTS, "latest.json"),
    JSON.stringify(
      {
        at: new Date().toISOString(),
        runs,
        rows: runs.flatMap((run) =>
          run.checks.map((c) => ({
            scenario: `seed ${run.plan.seed}: ${c.name}`,
            ok: c.violations.length === 0,
          })),
        ),
      },
      null,
      2,
    ),
  );
  log(`${plans.length - failures} run(s) passed, ${failures} failed`);
  return failures === 0 && runs.length > 0 ? 0 : 1;
}

main().then(exitWith, (error: unknown) => {
  console.error("[chaos] failed:", error);
  exitWith(1);
});
