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
 *   --ha              run on a Patroni cluster (primary + synchronous standby, etcd) behind HAProxy, with
 *                     the app instances behind HAProxy too, adding failovers: SIGKILL of the primary, a
 *                     switchover, an etcd restart (docs/scale-out.md)
 *   --webhooks=standard  MockPay signs every delivery as Standard Webhooks (v1), the merchant verifying with
 *                     the standardwebhooks package, on the spec's retry schedule (time-scaled)
 *   --with-standard-webhooks  after the runs above, the first plan again with --webhooks=standard (what CI does)
 *   --async-replication  with --ha: Patroni's synchronous_mode off, to see what a failover can lose
 * Process logs go to chaos-results/seed-N/.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getEnv } from "~/env";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { CATALOGUE, seedCatalogue } from "~/server/db/seed";
import { ensureBuild } from "./lib/build";
import {
  type AcknowledgedOrder,
  acknowledgedOrders,
  checkAnswersHold,
  checkInvariants,
  checkStandardWebhooks,
  settle,
  stallReport,
} from "./lib/chaos/checks";
import { Cluster } from "./lib/chaos/cluster";
import { History, readHistory } from "./lib/chaos/history";
import { checkHistory, formatAnomaly, verdictLine } from "./lib/chaos/history-check";
import { startOperator } from "./lib/chaos/operator";
import { startProber } from "./lib/chaos/prober";
import { Faults, Invariants, printReport } from "./lib/chaos/report";
import { runShopper, type ShopperRecord } from "./lib/chaos/shopper";
import { percentile, WriteLog } from "./lib/chaos/write-log";
import { startThrowawayPostgres } from "./lib/embedded-postgres";
import { exitWith } from "./lib/exit";
import { freePort } from "./lib/free-port";
import { HaStack, missingTools } from "./lib/ha/stack";

const REGRESSIONS = "chaos/regressions.json";
/** Each run's process logs (gitignored). */
const RESULTS = "chaos-results";

interface RunPlan {
  seed: number;
  shoppers: number;
  concurrency: number;
  crashRate: number;
  /** How MockPay signs its deliveries: its own format (the default), or Standard Webhooks. */
  webhooks?: "legacy" | "standard";
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

type SystemFault =
  | "kill A"
  | "kill B"
  | "drop connections"
  | "pause worker"
  | "kill primary"
  | "kill primary, standby behind"
  | "switchover"
  | "restart etcd";
/** The events of a run that hit the whole system, at fixed points of its progress. */
const SYSTEM_FAULTS: { at: number; fault: SystemFault }[] = [
  { at: 0.15, fault: "kill A" },
  { at: 0.25, fault: "pause worker" },
  { at: 0.35, fault: "drop connections" },
  { at: 0.55, fault: "kill B" },
  { at: 0.65, fault: "pause worker" },
  { at: 0.75, fault: "drop connections" },
];
/** With --ha, the database cluster's own faults too (one at a time, each once the cluster is whole). */
const HA_FAULTS: { at: number; fault: SystemFault }[] = [
  { at: 0.2, fault: "kill primary" },
  { at: 0.4, fault: "restart etcd" },
  { at: 0.6, fault: "kill primary, standby behind" },
  { at: 0.8, fault: "switchover" },
];
const SYSTEM_FAULT_NAMES: Record<SystemFault, string> = {
  "kill A": "app instance killed (SIGKILL) and restarted",
  "kill B": "app instance killed (SIGKILL) and restarted",
  "drop connections": "all database connections dropped",
  "pause worker": "worker paused 4 s (events queue; refunds land before fulfilment)",
  "kill primary":
    "primary PostgreSQL killed (SIGKILL): Patroni fails over, the old primary rejoins as a standby",
  "kill primary, standby behind":
    "primary killed after its walsender froze for 2 s (the standby behind: what asynchronous replication loses)",
  switchover: "controlled switchover of the primary (Patroni)",
  "restart etcd": "etcd (Patroni's store) killed and restarted",
};

/** One fault of the database cluster, and what the shoppers lived through meanwhile. */
interface Failover {
  fault: string;
  detail: string;
  /** From the fault to the cluster being whole again (new primary, old one rejoined). */
  seconds: number;
  /** Shoppers' writes it held up (an attempt failed, or it took over a second), and how long they waited. */
  writesHeld: number;
  p50: number;
  max: number;
  /** The longest time during it in which no shopper's write was answered. */
  longestSilence: number;
}

interface RunSummary {
  plan: RunPlan;
  faults: [string, number][];
  checks: { name: string; checked: number; violations: string[] }[];
  failovers?: Failover[];
}

interface HaRun {
  stack: HaStack;
  appPorts: number[];
  synchronous: boolean;
}

async function runOnce(plan: RunPlan, adminUrl: string, ha?: HaRun): Promise<RunSummary> {
  log(
    `seed ${plan.seed}: ${plan.shoppers} shoppers, ${plan.concurrency} at a time, worker crash rate ${plan.crashRate}${plan.webhooks === "standard" ? ", MockPay sending Standard Webhooks" : ""}`,
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
  const logDir = path.join(RESULTS, `seed-${plan.seed}${plan.webhooks === "standard" ? "-standard" : ""}`);
  rmSync(logDir, { recursive: true, force: true });
  mkdirSync(logDir, { recursive: true });
  const cluster = new Cluster({
    databaseUrl,
    consumerCrashRate: plan.crashRate,
    webhooks: plan.webhooks ?? "legacy",
    log,
    logDir,
    ...(ha ? { loadBalancer: { url: ha.stack.appUrl, appPorts: ha.appPorts } } : {}),
  });
  const records: ShopperRecord[] = [];
  const writes = new WriteLog();
  const history = new History();
  const windows: { fault: string; detail: string; from: number; to: number }[] = [];
  const started = Date.now();
  let stopOperator = async () => {};
  try {
    await cluster.start();
    stopOperator = startOperator(db, cluster, faults);
    // With --ha, a steady write every 100 ms or so from each of two probers, so every failover meets writes.
    const stopProber = ha
      ? startProber(cluster, faults, writes, { seed: plan.seed, loops: 2, gapMs: 100, history })
      : undefined;
    const skuIds = CATALOGUE.map((item) => item.id);
    let next = 0;
    let finished = 0;
    const pending = [...SYSTEM_FAULTS, ...(ha ? HA_FAULTS : [])].sort((a, b) => a.at - b.at);
    const systemFaults: Promise<unknown>[] = [];
    // With --ha the faults run one after another, so each failover's figures are its own.
    let previous: Promise<unknown> = Promise.resolve();
    const inject = async (fault: SystemFault): Promise<unknown> => {
      if (fault === "drop connections") return cluster.dropDatabaseConnections();
      if (fault === "pause worker") return cluster.pauseWorker(4_000);
      if (fault === "kill A" || fault === "kill B") return cluster.killApp(fault === "kill A" ? 0 : 1, 1_500);
      if (!ha) return;
      const from = Date.now();
      let detail = "";
      if (fault === "kill primary" || fault === "kill primary, standby behind") {
        const lag = fault === "kill primary" ? {} : { standbyLagMs: 2_000 };
        const { old, next } = await ha.stack.killPrimary(3_000, lag);
        detail = `${old} → ${next}`;
      } else if (fault === "switchover") {
        const { old, next } = await ha.stack.switchover();
        detail = `${old} → ${next}`;
      } else {
        await ha.stack.restartEtcd(3_000);
        detail = `primary ${await ha.stack.leader()}`;
      }
      windows.push({ fault, detail, from, to: Date.now() });
    };
    const onFinished = () => {
      finished++;
      while (pending[0] && finished / plan.shoppers >= pending[0].at) {
        const { fault } = pending.shift() as (typeof SYSTEM_FAULTS)[number];
        faults.count(SYSTEM_FAULT_NAMES[fault]);
        if (ha) {
          previous = previous.then(() => inject(fault));
          systemFaults.push(previous);
        } else systemFaults.push(inject(fault));
      }
    };
    await Promise.all(
      Array.from({ length: plan.concurrency }, async () => {
        while (next < plan.shoppers) {
          const index = next++;
          records.push(
            await runShopper({ seed: plan.seed, cluster, faults, skuIds, writes, history, db }, index),
          );
          onFinished();
        }
      }),
    );
    await Promise.all(systemFaults);
    const probed = (await stopProber?.()) ?? { orders: [] as AcknowledgedOrder[], gaveUp: [] };
    if (ha) log(`the probers placed ${probed.orders.length} orders through the failovers`);
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
    if (plan.webhooks === "standard") await checkStandardWebhooks(db, invariants);
    if (ha)
      invariants.check(
        "every prober order and cancel got its answer (none gave up)",
        probed.orders.length,
        probed.gaveUp,
      );
    invariants.check(
      "every acknowledged order is still in the database and still the answer to its request, after every fault (sent again at the end)",
      ...(await checkAnswersHold(
        db,
        cluster,
        [...acknowledgedOrders(records), ...probed.orders],
        faults,
        history,
      )),
    );
    // Every client's operations and what it was told, read back from the file and checked against the
    // database and MockPay (docs/chaos.md, "The history").
    const historyFile = path.join(logDir, "history.jsonl");
    history.save(historyFile);
    const verdict = await checkHistory(db, readHistory(historyFile));
    invariants.check(
      `the history (${historyFile}): well formed, answers to one key agree, every acknowledged effect exists as told, every unknown outcome resolved to zero or one effect, money conserved as MockPay's books say`,
      verdict.operations,
      verdict.anomalies.map(formatAnomaly),
    );
    printReport(faults, invariants, (line) => log(line));
    log(verdictLine(verdict));
    writeFileSync(path.join(logDir, "writes.json"), JSON.stringify({ windows, writes: writes.entries() }));
    const failovers = windows.map(({ fault, detail, from, to }): Failover => {
      const { held, longestSilence } = writes.during(from, to);
      return {
        fault,
        detail,
        seconds: (to - from) / 1000,
        writesHeld: held.length,
        p50: percentile(held, 0.5),
        max: held.at(-1) ?? 0,
        longestSilence,
      };
    });
    if (ha) {
      log(`database faults (${ha.synchronous ? "synchronous" : "asynchronous"} replication)`);
      for (const f of failovers) {
        log(
          `  ${f.fault} (${f.detail}): whole again in ${f.seconds.toFixed(1)} s; ${f.writesHeld} writes held up, ` +
            `waiting p50 ${f.p50.toFixed(1)} s, max ${f.max.toFixed(1)} s; no write answered for ${f.longestSilence.toFixed(1)} s`,
        );
      }
    }
    const ok = invariants.violationCount === 0;
    log(
      ok
        ? `seed ${plan.seed}: no violation`
        : `seed ${plan.seed}: ${invariants.violationCount} violation(s)${ha ? "" : ` — kept in ${REGRESSIONS}`}`,
    );
    // The kept seeds are replayed on one server; a failure of the cluster run is its own (CI runs it every time).
    if (!ok && !ha) keepRegression(plan, invariants);
    return { plan, faults: faults.entries(), checks: invariants.checks, ...(ha ? { failovers } : {}) };
  } finally {
    await stopOperator();
    await cluster.stop().catch(() => {});
    await closeDb(db);
    if (args.has("keep")) log(`database kept: ${databaseUrl}`);
    else await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}

/**
 * A run that threw before its checks: a failed row of its own, so the report is written, the other seeds still run
 * and CI's closing lines name the error.
 */
function abandoned(plan: RunPlan, error: unknown): RunSummary {
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  log(`seed ${plan.seed}: the run stopped on an error: ${detail}`);
  return {
    plan,
    faults: [],
    checks: [
      { name: "the run finishes (no error in the harness or the system)", checked: 1, violations: [detail] },
    ],
  };
}

function readRegressions(): Regression[] {
  if (!existsSync(REGRESSIONS)) return [];
  return (JSON.parse(readFileSync(REGRESSIONS, "utf8")) as { seeds: Regression[] }).seeds;
}

function keepRegression(plan: RunPlan, invariants: Invariants): void {
  const seeds = readRegressions();
  const same = (s: RunPlan) =>
    s.seed === plan.seed &&
    s.shoppers === plan.shoppers &&
    (s.webhooks ?? "legacy") === (plan.webhooks ?? "legacy");
  if (seeds.some(same)) return;
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
    ...(args.get("webhooks") === "standard" ? { webhooks: "standard" as const } : {}),
  };
  if (args.has("webhooks") && !["standard", "legacy"].includes(args.get("webhooks") ?? "")) {
    throw new Error("--webhooks is standard or legacy");
  }
  const plans = args.has("regressions")
    ? readRegressions()
    : args.has("with-regressions")
      ? [base, ...readRegressions().filter((r) => r.seed !== base.seed || r.shoppers !== base.shoppers)]
      : [base];
  if (args.has("with-standard-webhooks")) plans.push({ ...base, webhooks: "standard" });
  if (plans.length === 0) log(`no seeds in ${REGRESSIONS} yet`);
  let adminUrl = env.DATABASE_URL;
  let stopServer = async () => {};
  let ha: HaRun | undefined;
  if (args.has("ha")) {
    const missing = missingTools();
    if (missing.length > 0) {
      log(`--ha needs ${missing.join(", ")}: apt-get install -y patroni etcd-server haproxy postgresql`);
      return 1;
    }
    const appPorts = [await freePort(), await freePort()];
    const synchronous = !args.has("async-replication");
    rmSync(path.join(RESULTS, "ha"), { recursive: true, force: true });
    const stack = new HaStack({ synchronous, appPorts, log, logDir: path.join(RESULTS, "ha") });
    await stack.start();
    ha = { stack, appPorts, synchronous };
    adminUrl = stack.databaseUrl();
    stopServer = () => stack.stop();
  } else if (!adminUrl) {
    const server = await startThrowawayPostgres("checkout-chaos-pg", ["-c", "max_connections=300"]);
    adminUrl = server.adminUrl;
    stopServer = server.stop;
  }
  const runs: RunSummary[] = [];
  try {
    for (const plan of plans)
      runs.push(await runOnce(plan, adminUrl, ha).catch((error) => abandoned(plan, error)));
  } finally {
    await stopServer().catch((error: unknown) => log(`stopping the database failed: ${String(error)}`));
  }
  const failures = runs.filter((run) => run.checks.some((c) => c.violations.length > 0)).length;
  // One row per invariant and run, in the shape CI's totals read (.ci/totals.mjs).
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    path.join(RESULTS, ha ? "ha-latest.json" : "latest.json"),
    JSON.stringify(
      {
        at: new Date().toISOString(),
        runs,
        rows: runs.flatMap((run) =>
          run.checks.map((c) => ({
            scenario: `seed ${run.plan.seed} × ${run.plan.shoppers}${run.plan.webhooks === "standard" ? " (Standard Webhooks)" : ""}: ${c.name}`,
            ok: c.violations.length === 0,
            // The first few violations, so CI's closing lines say what failed (.ci/totals.mjs).
            detail: c.violations.slice(0, 3),
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
