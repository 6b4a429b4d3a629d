/**
 * `npm run interleavings`: permutation testing of the real code. For each pair of actors that can touch one
 * order at the same moment (scripts/lib/interleavings/pairs.ts), every interleaving of their SQL statements
 * within the preemption bound is run against a fresh story, statement by statement through a gate per
 * actor (scripts/lib/interleavings/gate.ts), and the end is settled and checked: reconciliation's invariants
 * with no lag, and one answer per key. Prints each pair's schedules and any found bad, naming the steps of
 * the first bad schedule in order; exits 1 if any was bad.
 *
 *   --pair=TEXT     only the pairs whose name contains TEXT
 *   --bound=N       preemptions per schedule (default 2; a pair may set its own)
 *   --max=N         schedules per pair at most (default 400): a pair that reaches it says so
 *   --report=FILE   also writes each pair's result there as JSON (CI's totals count them)
 *
 * Uses DATABASE_URL's server when set, else a throwaway embedded PostgreSQL; either way a database of its own.
 */
import { randomBytes } from "node:crypto";
import { getEnv } from "~/env";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { startThrowawayPostgres } from "./lib/embedded-postgres";
import { exitWith } from "./lib/exit";
import { type ActorRun, explore } from "./lib/interleavings/explore";
import { PAIRS } from "./lib/interleavings/pairs";
import { describeRun, type PairResult, printSummary, writeReport } from "./lib/interleavings/report";
import {
  actorPool,
  clearStories,
  closeWorld,
  createWorld,
  settleOrder,
  violationsByOrder,
} from "./lib/interleavings/world";

const args = new Map(
  process.argv.slice(2).map((arg) => {
    const [key = "", value = "true"] = arg.replace(/^--/, "").split("=");
    return [key, value] as const;
  }),
);
const bound = Number(args.get("bound") ?? 2);
const maxSchedules = Number(args.get("max") ?? 400);
const only = args.get("pair");

async function main(): Promise<number> {
  const started = performance.now();
  let serverUrl = getEnv().DATABASE_URL;
  let stopServer = async () => {};
  if (!serverUrl) {
    const server = await startThrowawayPostgres("checkout-interleavings-pg", ["-c", "fsync=off"]);
    serverUrl = server.adminUrl;
    stopServer = server.stop;
  }
  const name = `interleavings_${randomBytes(4).toString("hex")}`;
  const admin = pgClient(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  // Two actors waiting on each other are told at once, not after a second.
  await admin.unsafe(`ALTER DATABASE ${name} SET deadlock_timeout = '50ms'`);
  const url = databaseUrl(serverUrl, name);
  const results: PairResult[] = [];
  try {
    await runMigrations(url);
    const seeding = createDb(url, { max: 1 });
    await seedCatalogue(seeding);
    await closeDb(seeding);
    const world = createWorld(url);
    const control = pgClient(url, { max: 1, onnotice: () => {} });
    try {
      for (const pair of PAIRS.filter((p) => !only || p.name.includes(only))) {
        const pools = await Promise.all(pair.actors.map((actor) => actorPool(world, actor.connections ?? 2)));
        const pairStarted = performance.now();
        const pairBound = pair.bound ?? bound;
        try {
          const found = await explore({
            bound: pairBound,
            maxSchedules,
            control,
            batch: 20,
            begin: async () => {
              world.script.paid.clear();
              world.script.rejectNext = 0;
              world.script.away = false;
              world.script.accepted.clear();
              const fixture = await pair.setup(world);
              const actors: ActorRun[] = pair.actors.map((actor, i) => {
                const pool = pools[i] as (typeof pools)[number];
                return { name: actor.name, gate: pool.gate, act: () => actor.act(world, pool.db, fixture) };
              });
              return { world: fixture, actors };
            },
            check: async (fixture, run) => {
              await pair.afterwards?.(world, fixture);
              for (const orderId of pair.orders(fixture, run.answers)) await settleOrder(world, orderId);
              return pair.check ? await pair.check(world, fixture, run.answers) : [];
            },
            checkBatch: async (ended) => {
              const ordersOf = ended.map(({ world: fixture, run }) => pair.orders(fixture, run.answers));
              const found = await violationsByOrder(world, new Set(ordersOf.flat()));
              ended.forEach((schedule, i) => {
                for (const orderId of ordersOf[i] ?? [])
                  schedule.problems.push(...(found.get(orderId) ?? []));
                // What names none of their orders is every schedule's of the batch.
                schedule.problems.push(...(found.get("") ?? []));
              });
              await clearStories(world);
            },
          });
          const result: PairResult = {
            name: pair.name,
            bound: pairBound,
            ...found,
            seconds: (performance.now() - pairStarted) / 1000,
          };
          results.push(result);
          console.log(
            `${found.bad.length === 0 ? "ok " : "BAD"}  ${pair.name}: ${found.schedules} schedules` +
              ` (at most ${pairBound} preemptions${found.capped ? `, capped at ${maxSchedules}` : ""})` +
              `, ${found.bad.length} bad${found.diverged ? `, ${found.diverged} diverged` : ""}` +
              `, ${result.seconds.toFixed(1)} s`,
          );
          const [first] = found.bad;
          if (first) console.log(describeRun(first.run, first.problems));
        } finally {
          for (const pool of pools) {
            await closeDb(pool.db);
            await pool.gate.close();
          }
        }
      }
    } finally {
      await control.end();
      await closeWorld(world);
    }
  } finally {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    await stopServer();
  }
  printSummary(results, (performance.now() - started) / 1000);
  const report = args.get("report");
  if (report) writeReport(report, results);
  return results.some((r) => r.bad.length > 0) ? 1 : 0;
}

function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

main().then(exitWith, (error: unknown) => {
  console.error(error);
  exitWith(1);
});
