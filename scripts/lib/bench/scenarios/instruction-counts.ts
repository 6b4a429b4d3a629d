import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import type { Bench } from "../bench";
import { type Counts, callgrindWrapper, countWhile } from "../callgrind";
import { FRAMEWORKS, redisAnswers, startAdapter, startFloor, startPeer } from "../floor";
import { orderLoad, restToken, run, sessionCookie, startApp, type Transport } from "../load";
import { sideDatabase } from "../peer-database";
import { COUNTED, COUNTED_SERVERS, log, tiny } from "../settings";

/**
 * `npm run bench -- --instructions`: what one request costs each server's process in instructions, counted by
 * valgrind's callgrind rather than timed. A count does not depend on what else the machine is doing, so two
 * commits' counts can be compared where their timed ratios differ by more between two runs of one commit than
 * the change being judged. Each server (ours, the floor, the peer) runs under callgrind with its counting
 * switched off; each path is warmed up, then counted over requests sent one at a time (the lone path: no batch,
 * no wait) in a short and a long window: the difference of their counts over the difference of their requests. Every thread of the process counts (V8's compiler and collector
 * threads, libuv's pool). What a count leaves out: the database's work, the kernel's, and time spent waiting;
 * the timed ratios keep those.
 */
const WARM_REQUESTS = tiny ? 30 : 2_000;
/**
 * Requests in the long window: enough that the old generation's collections, rarer and larger than the young
 * generation's, fall into every path's count as often as its allocation calls for.
 */
const COUNTED_REQUESTS = tiny ? 20 : COUNTED;
/** The short window's requests (see countServer). */
const SHORT_WINDOW = Math.round(COUNTED_REQUESTS / 4);
/** Under valgrind a process runs tens of times slower: its start and its warm-up get minutes. */
const READY_MS = 600_000;

/** One path's instructions per request, by kind (../callgrind.ts). */
export interface Counted {
  path: string;
  /** The request's own work: every instruction but V8's compiling and collecting. */
  work: number;
  collecting: number;
  compiling: number;
}

export async function instructionCounts(bench: Pick<Bench, "url" | "cleanups">): Promise<Counted[]> {
  const dir = path.resolve("bench-results", "callgrind");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  log(
    `instructions per request, counted by callgrind (${WARM_REQUESTS} warm-up, ${COUNTED_REQUESTS} counted)`,
  );
  const counted: Counted[] = [];
  const tell = (entry: Counted) => {
    counted.push(entry);
    log(
      `  ${entry.path}: ${millions(entry.work)} M instructions per request; beside them collecting ${millions(entry.collecting)} M, compiling ${millions(entry.compiling)} M`,
    );
  };
  const wrapper = (name: string) => callgrindWrapper(dir, name);

  const floor = COUNTED_SERVERS.includes("floor") ? await startFloor(bench.url, wrapper("floor")) : undefined;
  if (floor) {
    bench.cleanups.unshift(() => floor.stop());
    for (const entry of await countServer(floor.child.pid, dir, "floor", [
      {
        name: "first execution, floor",
        baseUrl: floor.baseUrl,
        transport: { kind: "floor" },
        keys: freshKeys(),
      },
    ]))
      tell(entry);
    await floor.stop();
  }

  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  const peerAsked = COUNTED_SERVERS.includes("peer");
  if (peerAsked && (await redisAnswers(redisUrl))) {
    const db = await sideDatabase(bench.url, "callgrind_peer");
    bench.cleanups.unshift(db.drop);
    const peer = await startPeer(db.url, redisUrl, "express", wrapper("peer"));
    bench.cleanups.unshift(() => peer.stop());
    const keys = freshKeys();
    const transport: Transport = { kind: "peer" };
    for (const entry of await countServer(peer.child.pid, dir, "peer", [
      { name: "first execution, peer", baseUrl: peer.baseUrl, transport, keys },
      { name: "replay, peer", baseUrl: peer.baseUrl, transport, keys, replay: true },
    ]))
      tell(entry);
    await peer.stop();
  } else if (peerAsked) {
    log(`  peer skipped: no Redis answers at ${redisUrl}`);
  }

  for (const framework of FRAMEWORKS.filter((f) => COUNTED_SERVERS.includes(f))) {
    if (!(await redisAnswers(redisUrl))) {
      log(`  ${framework} skipped: no Redis answers at ${redisUrl} (the peer keeps its records there)`);
      continue;
    }
    for (const who of ["ours", "peer"] as const) {
      const db = await sideDatabase(bench.url, `callgrind_${who}_${framework}`);
      bench.cleanups.unshift(db.drop);
      const name = `${framework}, ${who === "ours" ? "adapter" : "peer"}`;
      const dumps = `${framework}-${who === "ours" ? "adapter" : "peer"}`;
      const server =
        who === "ours"
          ? await startAdapter(db.url, framework, wrapper(dumps))
          : await startPeer(db.url, redisUrl, framework, wrapper(dumps));
      bench.cleanups.unshift(() => server.stop());
      const keys = freshKeys();
      const transport: Transport = { kind: "peer" };
      for (const entry of await countServer(server.child.pid, dir, dumps, [
        { name: `first execution, ${name}`, baseUrl: server.baseUrl, transport, keys },
        { name: `replay, ${name}`, baseUrl: server.baseUrl, transport, keys, replay: true },
      ]))
        tell(entry);
      await server.stop();
    }
  }

  if (!COUNTED_SERVERS.includes("app")) return counted;
  const app = await startApp(bench.url, {}, [], { wrapper: wrapper("app"), readyTimeoutMs: READY_MS });
  bench.cleanups.unshift(() => app.stop());
  const rest: Transport = { kind: "rest", token: (await restToken(app.baseUrl)).token };
  const trpc: Transport = { kind: "trpc", cookie: await sessionCookie(app.baseUrl) };
  const restKeys = freshKeys();
  const trpcKeys = freshKeys();
  const { baseUrl } = app;
  for (const entry of await countServer(app.child.pid, dir, "app", [
    { name: "first execution over REST", baseUrl, transport: rest, keys: restKeys },
    { name: "first execution over tRPC", baseUrl, transport: trpc, keys: trpcKeys },
    { name: "replay over REST", baseUrl, transport: rest, keys: restKeys, replay: true },
    { name: "replay over tRPC", baseUrl, transport: trpc, keys: trpcKeys, replay: true },
  ]))
    tell(entry);
  await app.stop();
  return counted;
}

/** One path of a server: a replay path sends its first execution's keys again (listed after it). */
interface CountedPath {
  name: string;
  baseUrl: string;
  transport: Transport;
  keys: string[];
  replay?: boolean;
}

const millions = (n: number) => (n / 1e6).toFixed(3);

/** Keys for the warm-up and for the counted requests; a replay path sends them again. */
function freshKeys(): string[] {
  return Array.from({ length: WARM_REQUESTS + SHORT_WINDOW + COUNTED_REQUESTS }, () => randomUUID());
}

/** `amount` requests of `path`, one at a time, with its keys from `from` on. */
async function send(path: CountedPath, from: number, amount: number): Promise<void> {
  const keys = path.keys.slice(from, from + amount);
  const { duration: _, ...load } = orderLoad(path.baseUrl, path.transport, keys, 0, null);
  const result = await run({ ...load, connections: 1, amount, timeout: 120 });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${path.name}: ${result.non2xx} non-2xx answers and ${result.errors} errors`);
}

/**
 * Counts each path of one server. Every path is warmed up first, with counting off (code they share is
 * compiled before any of them is counted); then each is counted in two windows, a short and a long one, whose
 * difference is divided by the difference of their requests: what a window costs whatever it holds (switching
 * the counting on and off, the load generator's connection) cancels out. A replay path's counted keys are
 * replayed once before they are counted, as a retry that comes again would be.
 */
async function countServer(
  pid: number | undefined,
  dir: string,
  server: string,
  paths: CountedPath[],
): Promise<Counted[]> {
  if (pid === undefined) throw new Error(`${server}: no process to count`);
  for (const path of paths) await send(path, 0, WARM_REQUESTS);
  const windowOf = (path: CountedPath, from: number, amount: number) =>
    countWhile(pid, dir, server, () => send(path, from, amount));
  const counted: Counted[] = [];
  for (const path of paths) {
    if (path.replay) await send(path, WARM_REQUESTS, SHORT_WINDOW + COUNTED_REQUESTS);
    const short = await windowOf(path, WARM_REQUESTS, SHORT_WINDOW);
    const long = await windowOf(path, WARM_REQUESTS + SHORT_WINDOW, COUNTED_REQUESTS);
    const per = (kind: keyof Counts) =>
      Math.round((long[kind] - short[kind]) / (COUNTED_REQUESTS - SHORT_WINDOW));
    counted.push({
      path: path.name,
      work: per("total") - per("compiling") - per("collecting"),
      compiling: per("compiling"),
      collecting: per("collecting"),
    });
  }
  return counted;
}
