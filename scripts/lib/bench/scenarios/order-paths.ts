import { randomUUID } from "node:crypto";
import type autocannon from "autocannon";
import type { CpuMeter } from "../../cpu";
import type { Bench } from "../bench";
import { type BenchServer, redisAnswers, serverMeter, startFloor, startPeer } from "../floor";
import {
  BASELINE,
  combine,
  orderLoad,
  orderRequest,
  restToken,
  run,
  sessionCookie,
  type Transport,
} from "../load";
import { peerDatabase } from "../peer-database";
import { withRuntime } from "../runtime";
import { DURATION, log, ROUNDS, type RuntimeWindow, WARMUP } from "../settings";

interface Path {
  id: string;
  scenario: string;
  baseUrl: string;
  transport: Transport;
  /** Whose orders it makes (null: not counted, the unprotected baseline). */
  userId: string | null;
  cpu: CpuMeter;
  runs: autocannon.Result[];
  /** The bench app's runtime in each round (its own paths only). */
  runtime: (RuntimeWindow | undefined)[];
  sent: { count: number };
}

/**
 * A replay is a retry: it comes seconds or minutes after its first execution. Each path's replays are of its
 * most recent keys, as many as this, for ours and for the peer alike. An instance's replay cache keeps the last
 * IDEMPOTENCY_CACHE_ENTRIES (20,000) outcomes, fewer than the rounds above make over both transports; replaying
 * every key in the order it was made would be a scan of a least-recently-used cache larger than it, where every
 * read misses and evicts the next key to be read: that measures the record's read (the database path), not a
 * retry.
 */
const REPLAY_KEYS = 5_000;

/**
 * The order paths, each measured against the floor in the same rounds:
 *   floor    a bare node:http server, the same transaction, nothing else (every ratio is divided by it)
 *   baseline the tRPC stack without the idempotency record
 *   first    first executions over tRPC and over REST, each with its whole stack
 *   replay   the same keys again, over each transport: no write, the first answer byte for byte
 *   peer     @node-idempotency with Redis in Express (./peer-server.ts), the same order on its own database:
 *            its first executions take turns with ours, and its replays are measured like ours; the targets
 *            of issue 27 are ratios to it (skipped, with the reason, when no Redis answers)
 */
export async function orderPaths(bench: Bench) {
  const { app, cookie, userId, meter, add, total, url } = bench;
  const floor = await startFloor(url);
  bench.cleanups.unshift(() => floor.stop());
  const peer = await startPeerIfRedis(bench);
  const rest = await restToken(app.baseUrl);
  const floorMeter = () => serverMeter(floor);
  const floorCpu = floorMeter();
  const path = (
    id: string,
    scenario: string,
    baseUrl: string,
    transport: Transport,
    who: string | null,
    cpu = meter(),
  ): Path => ({
    id,
    scenario,
    baseUrl,
    transport,
    userId: who,
    cpu,
    runs: [],
    runtime: [],
    sent: { count: 0 },
  });
  const baselineCookie = await sessionCookie(app.baseUrl);
  const paths = [
    path(
      "floor",
      "1 floor: bare node:http + postgres.js, same transaction",
      floor.baseUrl,
      { kind: "floor" },
      floor.userId,
      floorCpu,
    ),
    path(
      "baseline",
      "2 tRPC stack, no idempotency record",
      app.baseUrl,
      { kind: "trpc", cookie: baselineCookie, procedure: BASELINE },
      null,
    ),
    path(
      "first-trpc",
      "3 first execution, tRPC orders.create",
      app.baseUrl,
      { kind: "trpc", cookie },
      userId,
    ),
    path(
      "first-rest",
      "4 first execution, REST POST /api/v1/orders",
      app.baseUrl,
      { kind: "rest", token: rest.token },
      rest.userId,
    ),
  ];
  if (peer)
    paths.push(
      path(
        "peer-first",
        "7 peer: first execution, @node-idempotency + Redis in Express",
        peer.server.baseUrl,
        { kind: "peer" },
        peer.server.userId,
        serverMeter(peer.server),
      ),
    );

  // JIT, statement caches and pool connections warm up on shoppers of their own, for every path alike.
  log(`warm-up: ${WARMUP}s on each path`);
  const warmCookie = await sessionCookie(app.baseUrl);
  const warmToken = (await restToken(app.baseUrl)).token;
  for (const p of paths) {
    const transport: Transport =
      p.transport.kind === "trpc"
        ? { ...p.transport, cookie: warmCookie }
        : p.transport.kind === "rest"
          ? { kind: "rest", token: warmToken }
          : p.transport;
    const warmKeys = Array.from({ length: 50_000 }, () => randomUUID());
    await run({ ...orderLoad(p.baseUrl, transport, warmKeys, 0, null), duration: WARMUP });
  }

  // Orders already there (the floor's and the peer's warm-ups share their shopper) are not the rounds'; counted
  // once the warm-up's requests still in flight have committed (a run once counted one of them as the rounds').
  const before = new Map<string, number>();
  const ordersOf = (p: Path) => `SELECT count(*)::int AS n FROM orders WHERE user_id = '${p.userId}'`;
  const settledOf = (p: Path) =>
    (p.id === "peer-first" && peer ? peer.db.settled : bench.settled)(ordersOf(p));
  for (const p of paths) {
    if (p.userId) before.set(p.id, await settledOf(p));
  }
  // The paths take turns in short rounds, so drift on a shared machine hits them alike.
  log(
    `1-4. floor, baseline and first executions: ${ROUNDS} interleaved rounds of ${DURATION / ROUNDS}s each`,
  );
  for (let round = 0; round < ROUNDS; round++) {
    for (const p of paths) {
      const keys = Array.from({ length: 100_000 }, () => randomUUID());
      await measureRound(p, app.baseUrl, () =>
        p.cpu.measure(
          () => run({ ...orderLoad(p.baseUrl, p.transport, keys, 0, p.sent), duration: DURATION / ROUNDS }),
          total,
        ),
      );
    }
  }
  const created = new Map<string, number>();
  for (const p of paths) {
    const result = combine(p.runs);
    if (p.userId === null) {
      add(
        p.id,
        p.scenario,
        result,
        `${result.non2xx} errors`,
        true,
        p.cpu,
        p === paths[0] ? floor.child : undefined,
        p.runs,
        p.runtime,
      );
      continue;
    }
    const all = await settledOf(p);
    created.set(p.id, all);
    const orders = all - (before.get(p.id) ?? 0);
    // autocannon stops with requests in flight: they may commit without being counted, never twice.
    add(
      p.id,
      p.scenario,
      result,
      `${orders} orders for ${result["2xx"]} answered / ${p.sent.count} sent`,
      orders >= result["2xx"] && orders <= p.sent.count,
      p.cpu,
      p.id === "floor" ? floor.child : p.id === "peer-first" ? peer?.server.child : undefined,
      p.runs,
      p.runtime,
    );
  }
  await replays(bench, paths, created, peer);

  // The least any node:http server spends on a request (read it, answer from memory): no replay beats it.
  log("replay ceiling: the floor's bare node:http answering from memory");
  const ceilingCpu = floorMeter();
  const keys = Array.from({ length: 1_000 }, () => randomUUID());
  const ceiling = await ceilingCpu.measure(
    () => run(orderLoad(floor.baseUrl, { kind: "floor", fromMemory: true }, keys, 0, null)),
    total,
  );
  add(
    "memory",
    "5-6 ceiling: bare node:http answering from memory",
    ceiling,
    `${ceiling.non2xx} errors`,
    true,
    ceilingCpu,
    floor.child,
  );
}

interface Peer {
  server: BenchServer;
  db: Awaited<ReturnType<typeof peerDatabase>>;
}

/** The peer on its own database, if a Redis answers (REDIS_URL, or the machine's at 127.0.0.1:6379). */
async function startPeerIfRedis(bench: Bench): Promise<Peer | undefined> {
  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  if (!(await redisAnswers(redisUrl))) {
    log(`peer skipped: no Redis answers at ${redisUrl} (@node-idempotency keeps its records there)`);
    return undefined;
  }
  const db = await peerDatabase(bench.url);
  bench.cleanups.unshift(db.drop);
  const server = await startPeer(db.url, redisUrl);
  bench.cleanups.unshift(() => server.stop());
  return { server, db };
}

/** A path's replays: its most recent keys again, and how to check nothing new was written. */
interface Replay {
  id: string;
  scenario: string;
  baseUrl: string;
  transport: Transport;
  keys: string[];
  cpu: CpuMeter;
  runs: autocannon.Result[];
  /** The bench app's runtime in each round (its own replays only). */
  runtime: (RuntimeWindow | undefined)[];
  /** Whose orders they are, where they are counted, and how many there were before. */
  orders: { userId: string; settled: (sql: string) => Promise<number>; before: number };
  /** Ours: 20 fresh keys each sent twice must get the first answer's bytes back. */
  bytes: boolean;
  process?: BenchServer["child"];
}

/**
 * 5, 6 and the peer's replay: the same keys again. Like the first executions, the three take turns in short
 * rounds, so drift on a shared machine hits them alike (run one after the other, a replay's ratio to the
 * peer's moved by a quarter between runs of the same code).
 */
async function replays(bench: Bench, paths: Path[], created: Map<string, number>, peer: Peer | undefined) {
  const { db, app, meter, settled, add, total } = bench;
  const recent = async (sql: typeof db.$client, userId: string) =>
    (
      await sql<{ request_id: string }[]>`
        SELECT request_id FROM orders WHERE user_id = ${userId} ORDER BY created_at DESC LIMIT ${REPLAY_KEYS}`
    ).map((r) => r.request_id);
  const all: Replay[] = [];
  if (peer)
    all.push({
      id: "peer-replay",
      scenario: "8 peer: replay, @node-idempotency + Redis in Express",
      baseUrl: peer.server.baseUrl,
      transport: { kind: "peer" },
      keys: await recent(peer.db.sql, peer.server.userId),
      cpu: serverMeter(peer.server),
      runs: [],
      runtime: [],
      orders: {
        userId: peer.server.userId,
        settled: peer.db.settled,
        before: created.get("peer-first") ?? 0,
      },
      bytes: false,
      process: peer.server.child,
    });
  for (const [id, scenario, first] of [
    ["replay-trpc", "5 replay, tRPC", paths[2]],
    ["replay-rest", "6 replay, REST", paths[3]],
  ] as const) {
    if (!first?.userId) continue;
    all.push({
      id,
      scenario,
      baseUrl: app.baseUrl,
      transport: first.transport,
      keys: await recent(db.$client, first.userId),
      cpu: meter(),
      runs: [],
      runtime: [],
      orders: { userId: first.userId, settled, before: created.get(first.id) ?? 0 },
      bytes: true,
    });
  }
  log(
    `replays (${all.map((r) => r.scenario).join("; ")}): the same keys again, ${ROUNDS} interleaved rounds`,
  );
  for (let round = 0; round < ROUNDS; round++) {
    for (const r of all) {
      await measureRound(r, app.baseUrl, () =>
        r.cpu.measure(
          () => run({ ...orderLoad(r.baseUrl, r.transport, r.keys, 0, null), duration: DURATION / ROUNDS }),
          total,
        ),
      );
    }
  }
  for (const r of all) {
    const result = combine(r.runs);
    const after = await r.orders.settled(
      `SELECT count(*)::int AS n FROM orders WHERE user_id = '${r.orders.userId}'`,
    );
    const same = r.bytes ? await answersAgree(app.baseUrl, r.transport) : undefined;
    add(
      r.id,
      r.scenario,
      result,
      `${after - r.orders.before} new orders (must be 0)` +
        (same ? `; ${same.same}/${same.checked} replays byte for byte the first answer` : ""),
      after === r.orders.before && (!same || same.same === same.checked),
      r.cpu,
      r.process,
      r.runs,
      r.runtime,
    );
  }
}

/** One round of a path: its run kept, and, for the bench app's own paths, what its runtime did meanwhile. */
async function measureRound(
  path: { baseUrl: string; runs: autocannon.Result[]; runtime: (RuntimeWindow | undefined)[] },
  appUrl: string,
  measured: () => Promise<autocannon.Result>,
): Promise<void> {
  if (path.baseUrl !== appUrl) {
    path.runs.push(await measured());
    return;
  }
  const { value, runtime } = await withRuntime(appUrl, measured);
  path.runs.push(value);
  path.runtime.push(runtime);
}

/** New keys, each sent twice: the second answer must be the first one's bytes (tRPC's `replayed` flag aside). */
async function answersAgree(baseUrl: string, transport: Transport, checked = 20) {
  let same = 0;
  for (let i = 0; i < checked; i++) {
    const request = orderRequest(transport, randomUUID());
    const send = async () => {
      const response = await fetch(`${baseUrl}${request.path}`, {
        method: "POST",
        headers: request.headers,
        body: request.body,
      });
      return response.text();
    };
    const first = await send();
    const again = await send();
    if (again.replace('"replayed":true', '"replayed":false') === first) same++;
  }
  return { checked, same };
}
