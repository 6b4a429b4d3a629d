/**
 * `npm run bench`: throughput, latency, memory and correctness of the idempotent
 * paths, over real HTTP against the built app on a fresh database.
 *   --duration=S      seconds per load scenario (default 10)
 *   --warmup=S        seconds of warm-up on each path before measuring (default 3)
 *   --rounds=N        interleaved rounds of baseline and first execution (default 3)
 *   --connections=N   concurrent connections (default 20)
 *   --storm=N         copies in the duplicate storm (default 500)
 *   --orders=N        paid orders in the callback storm (default 100), 10 notifications each
 *   --keep-alive=N    concurrent keep-alive connections held open (default 2000)
 *   --profile=W       when to profile a path after the run: on-miss (default; off with --tiny), always, never
 *   --tiny            a quick run that only proves the script works (CI)
 *   --outside         the shape of a run measured from outside: the order paths only, 20 connections, 3
 *                     interleaved rounds of 8 s (each option above still overrides it)
 *   --adapters        the package's adapters (Express, Fastify, Hono) each beside the peer in the same
 *                     framework, and nothing else; --tiny runs Express's (CI), a default run none
 *   --frameworks=A,B  which adapters' frameworks, in this order (default express,fastify,hono)
 *   --instructions    instructions per request of each path, counted under valgrind's callgrind (not timed:
 *                     comparable across commits on a noisy machine), and nothing else; takes minutes;
 *                     --servers=floor,peer,app says whose (express, fastify, hono: the adapter and the peer in
 *                     that framework), --counted=1600 how many requests a path's long window has
 *   --app=DIR         measure the built app of another checkout (DIR) with this bench: two commits compared by
 *                     one harness (build DIR first)
 *   --only=A,B        only these scenarios (by function name: orderPaths, callbackStorm, …); while working
 *                     on one path. A ratio whose rows did not run is shown as not measured.
 * Writes bench-results/latest.json and bench-results/latest.html.
 */
import { writeFileSync } from "node:fs";
import type autocannon from "autocannon";
import { getEnv } from "~/env";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import type { Bench } from "./lib/bench/bench";
import { latencyCurve, peakRssMb, sessionCookie, startApp } from "./lib/bench/load";
import { profilePath } from "./lib/bench/profile";
import { ratiosOf, report, TARGETS } from "./lib/bench/report";
import { adapterPaths } from "./lib/bench/scenarios/adapter-paths";
import { backgroundWork } from "./lib/bench/scenarios/background-work";
import { callbackStorm } from "./lib/bench/scenarios/callback-storm";
import { databaseFloor } from "./lib/bench/scenarios/database-floor";
import { duplicateStorm } from "./lib/bench/scenarios/duplicate-storm";
import { expiredKey } from "./lib/bench/scenarios/expired-key";
import { instructionCounts } from "./lib/bench/scenarios/instruction-counts";
import { keepAlive } from "./lib/bench/scenarios/keep-alive";
import { millionRows } from "./lib/bench/scenarios/million-rows";
import { orderPaths } from "./lib/bench/scenarios/order-paths";
import { reconciliationScale } from "./lib/bench/scenarios/reconciliation-scale";
import { twoInstances } from "./lib/bench/scenarios/two-instances";
import { instructions, log, ONLY, PROFILE, PROFILE_SECONDS, type Row, tiny } from "./lib/bench/settings";
import { settledCount } from "./lib/bench/settle";
import { ensureBuild } from "./lib/build";
import { CpuMeter, mainThreadCpuMs, ownCpuMs, processCpuMs } from "./lib/cpu";
import { startThrowawayPostgres } from "./lib/embedded-postgres";
import { exitWith } from "./lib/exit";

async function main() {
  const env = getEnv();
  await ensureBuild(log);
  const cleanups: Array<() => Promise<void>> = [];
  let adminUrl = env.DATABASE_URL;
  if (!adminUrl) {
    const server = await startThrowawayPostgres("checkout-bench-pg", ["-c", "max_connections=300"]);
    adminUrl = server.adminUrl;
    cleanups.push(server.stop);
  }
  const dbName = `checkout_bench_${Date.now()}`;
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${dbName}`);
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;
  const url = dbUrl.toString();
  cleanups.unshift(async () => {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  });
  await runMigrations(url);
  const db = createDb(url, { max: 25 });
  await seedCatalogue(db);
  await db.$client`UPDATE sku SET stock = 100000000, initial_stock = 100000000`;
  const count = async (sql: string) => Number((await db.$client.unsafe(sql))[0]?.n ?? 0);
  /** Requests still in flight when the load stopped commit a moment later: count once nothing changes. */
  const settled = settledCount(count);
  if (instructions) {
    try {
      const counted = await instructionCounts({ url, cleanups });
      writeFileSync("bench-results/instructions.json", `${JSON.stringify(counted, null, 2)}\n`);
      const of = (name: string) => counted.find((c) => c.path === name)?.work;
      for (const c of counted) {
        const floor = of("first execution, floor");
        const peer = of(c.path.startsWith("replay") ? "replay, peer" : "first execution, peer");
        const against = [
          floor && `${(c.work / floor).toFixed(2)} × the floor's first execution`,
          peer && `${(c.work / peer).toFixed(2)} × the peer's`,
        ]
          .filter(Boolean)
          .join(", ");
        console.log(
          `${c.path}: ${(c.work / 1e6).toFixed(3)} M instructions per request, compiling and collecting aside (${against})`,
        );
      }
      return 0;
    } finally {
      await closeDb(db);
      for (const cleanup of cleanups) await cleanup().catch(() => {});
    }
  }
  const rows: Row[] = [];
  let appPeak: number | null = null;
  const profiles: { ratio: string; lines: string[] }[] = [];
  const app = await startApp(url);
  cleanups.unshift(() => app.stop());
  try {
    const cookie = await sessionCookie(app.baseUrl);
    const userId = decodeURIComponent(cookie.split("=")[1] ?? "").split(".")[0] ?? "";
    const appCpu = () => processCpuMs(app.child.pid);
    const meter = () => new CpuMeter(appCpu, ownCpuMs, () => mainThreadCpuMs(app.child.pid));
    const total = (r: autocannon.Result) => r.requests.total;
    const add: Bench["add"] = (id, scenario, r, correctness, ok, cpu, process = app.child, rounds, runtime) =>
      rows.push({
        id,
        scenario,
        requestsPerSec: Math.round(r.requests.average),
        ...(runtime && runtime.length > 0 ? { runtime } : {}),
        ...(rounds
          ? {
              rounds: rounds.map((round) =>
                Math.round(round.requests.total / Math.max(round.duration, 0.001)),
              ),
            }
          : {}),
        ...cpu.perRequest(),
        p50Ms: r.latency.p50,
        p99Ms: r.latency.p99,
        latency: latencyCurve(r),
        peakRssMb: peakRssMb(process),
        correctness,
        ok: ok && r.non2xx === 0 && r.errors === 0,
      });
    const bench: Bench = {
      db,
      url,
      app,
      cookie,
      userId,
      rows,
      cleanups,
      count,
      settled,
      appCpu,
      meter,
      total,
      add,
    };
    const scenarios = [
      orderPaths,
      adapterPaths,
      duplicateStorm,
      callbackStorm,
      twoInstances,
      databaseFloor,
      keepAlive,
      expiredKey,
      backgroundWork,
      // Last: they fill tables of their own.
      millionRows,
      reconciliationScale,
    ];
    const unknown = ONLY?.filter((name) => !scenarios.some((s) => s.name === name)) ?? [];
    if (unknown.length > 0) throw new Error(`--only: no scenario ${unknown.join(", ")}`);
    for (const scenario of scenarios) {
      const chosen = ONLY ? ONLY.includes(scenario.name) : scenario !== adapterPaths || tiny;
      if (chosen) await scenario(bench);
    }
    appPeak = peakRssMb(app.child);
    await app.stop();
    // A missed ratio comes with where the time goes on its path (scripts/lib/bench/profile.ts).
    const profiled = new Set<string>();
    for (const ratio of ratiosOf(rows)) {
      if (!ratio.measured || !(PROFILE === "always" || (PROFILE === "on-miss" && !ratio.met))) continue;
      const target = TARGETS.find((t) => t.name === ratio.name);
      // One profile per path, whichever of its ratios missed.
      // (The scale ratio's paths are the first executions', measured again on bigger tables: not profiled twice.)
      if (!target || profiled.has(target.over) || !/^(first|replay)-/.test(target.over)) continue;
      profiled.add(target.over);
      const kind = target.over.endsWith("rest") ? "rest" : "trpc";
      const lines = await profilePath(url, kind, target.over.startsWith("replay"), PROFILE_SECONDS);
      profiles.push({ ratio: ratio.name, lines });
    }
  } finally {
    await closeDb(db);
    for (const cleanup of cleanups) await cleanup().catch(() => {});
  }
  return report(rows, appPeak, profiles) ? 0 : 1;
}

main().then(exitWith, (error: unknown) => {
  console.error("[bench] failed:", error);
  exitWith(1);
});
