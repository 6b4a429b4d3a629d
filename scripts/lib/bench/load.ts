import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import autocannon from "autocannon";
import { type AppProcess, startAppProcess } from "../app-process";
import { freePort } from "../free-port";
import {
  APP_DIR,
  BENCH_ADMIN_TOKEN,
  BENCH_SESSION_SECRET,
  CONNECTIONS,
  DURATION,
  type LatencyPoint,
  SECRET,
} from "./settings";

export function peakRssMb(child: ChildProcess): number | null {
  try {
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    const kb = Number(status.match(/VmHWM:\s+(\d+)/)?.[1]);
    return Number.isFinite(kb) ? Math.round(kb / 1024) : null;
  } catch {
    return null;
  }
}

export async function startApp(
  databaseUrl: string,
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
  under: { wrapper?: string[]; readyTimeoutMs?: number } = {},
): Promise<AppProcess> {
  return startAppProcess({
    port: await freePort(),
    nodeArgs,
    ...(APP_DIR ? { dir: APP_DIR } : {}),
    ...under,
    env: {
      DATABASE_URL: databaseUrl,
      BENCH_ROUTES: "true",
      LOG_LEVEL: "warn",
      GATEWAY_ENABLED: "false",
      WORKER_IN_APP: "false",
      PROVIDER_DELIVERY_POLL_MS: "0",
      PAYMENT_QUERY_INTERVAL_MS: "0",
      IDEMPOTENCY_CLEANUP_INTERVAL_MS: "0",
      PROVIDER_WEBHOOK_SECRET: SECRET,
      SESSION_SECRET: BENCH_SESSION_SECRET,
      ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      DB_POOL_MAX: "20",
      // The load comes from one address (this machine), as no real client's would: let it all in.
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: "4096",
      ...env,
    },
  });
}

export async function sessionCookie(url: string): Promise<string> {
  const response = await fetch(`${url}/api/trpc/catalog.list`);
  return (response.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
}

/** autocannon's latency percentiles that the report draws, with the percentile each names. */
const PERCENTILES = [
  ["p1", 1],
  ["p2_5", 2.5],
  ["p10", 10],
  ["p25", 25],
  ["p50", 50],
  ["p75", 75],
  ["p90", 90],
  ["p97_5", 97.5],
  ["p99", 99],
  ["p99_9", 99.9],
] as const;

/** The latency distribution of an autocannon result. */
export function latencyCurve(result: autocannon.Result): LatencyPoint[] {
  return PERCENTILES.map(([key, percentile]) => ({ percentile, ms: result.latency[key] }));
}

/** The latency distribution of measured latencies (ms, any order). */
export function latencyCurveOf(samples: number[]): LatencyPoint[] {
  const sorted = [...samples].sort((a, b) => a - b);
  if (sorted.length === 0) return [];
  return PERCENTILES.map(([, percentile]) => ({
    percentile,
    ms: sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * percentile) / 100))] ?? 0,
  }));
}

/** Several runs of one scenario as one: requests over total time, mean p50 (and other percentiles), worst p99. */
export function combine(runs: autocannon.Result[]): autocannon.Result {
  const sum = (f: (r: autocannon.Result) => number) => runs.reduce((total, r) => total + f(r), 0);
  const seconds = sum((r) => r.duration);
  const [firstRun] = runs;
  if (!firstRun) throw new Error("no runs to combine");
  return {
    ...firstRun,
    duration: seconds,
    "2xx": sum((r) => r["2xx"]),
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    requests: {
      ...firstRun.requests,
      total: sum((r) => r.requests.total),
      average: sum((r) => r.requests.total) / seconds,
    },
    latency: {
      ...firstRun.latency,
      ...Object.fromEntries(
        PERCENTILES.map(([key]) => [key, Math.round((sum((r) => r.latency[key]) / runs.length) * 100) / 100]),
      ),
      p50: Math.round(sum((r) => r.latency.p50) / runs.length),
      p99: Math.max(...runs.map((r) => r.latency.p99)),
    },
  };
}

export function run(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

/** Keys handed to first-execution requests so far (in-flight ones at the end included); loads count in their own. */
export const sent = { count: 0 };
export const CREATE_ORDER = "/api/trpc/orders.create";
export const BASELINE = "/api/bench/trpc/placeOrderUnprotected";
export const REST_ORDERS = "/api/v1/orders";
export const FLOOR_ORDERS = "/orders";
export const FLOOR_ANSWER = "/answer";

/**
 * How one order request travels: tRPC (cookie), REST (bearer token, Idempotency-Key), the floor's bare
 * JSON (to place the order, or `fromMemory` to be answered without the database), or the peer's.
 */
export type Transport =
  | { kind: "trpc"; cookie: string; procedure?: string }
  | { kind: "rest"; token: string }
  | { kind: "floor"; fromMemory?: boolean }
  /** The peer (./peer-server.ts): the floor's body, and the key in the Idempotency-Key header. */
  | { kind: "peer" };

const ITEMS = [{ skuId: "SKU-MUG", quantity: 1 }];

/** The path, headers and body of one order request with `key`. */
export function orderRequest(
  transport: Transport,
  key: string,
): { path: string; headers: Record<string, string>; body: string } {
  switch (transport.kind) {
    case "trpc":
      return {
        path: transport.procedure ?? CREATE_ORDER,
        headers: { "content-type": "application/json", cookie: transport.cookie },
        body: JSON.stringify({ json: { requestId: key, items: ITEMS } }),
      };
    case "rest":
      return {
        path: REST_ORDERS,
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${transport.token}`,
          "idempotency-key": key,
        },
        body: JSON.stringify({ items: ITEMS }),
      };
    case "peer":
      return {
        path: FLOOR_ORDERS,
        headers: { "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify({ requestId: key, items: ITEMS }),
      };
    case "floor":
      return {
        path: transport.fromMemory ? FLOOR_ANSWER : FLOOR_ORDERS,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ requestId: key, items: ITEMS }),
      };
  }
}

/** autocannon options: order requests to `url`, one key after another from `keys` (counted in `sent`). */
export function orderLoad(
  url: string,
  transport: Transport,
  keys: string[],
  start = 0,
  counter: { count: number } | null = sent,
): autocannon.Options {
  let i = start;
  const first = orderRequest(transport, "");
  return {
    url: `${url}${first.path}`,
    method: "POST",
    connections: CONNECTIONS,
    duration: DURATION,
    headers: Object.fromEntries(Object.entries(first.headers).filter(([name]) => name !== "idempotency-key")),
    requests: [
      {
        setupRequest: (req) => {
          const key = keys[i++ % keys.length] ?? randomUUID();
          if (counter) counter.count++;
          const { headers, body } = orderRequest(transport, key);
          return { ...req, headers, body };
        },
      },
    ],
  };
}

/** A bearer token for the REST API (a shopper of its own). */
export async function restToken(url: string): Promise<{ token: string; userId: string }> {
  const response = await fetch(`${url}/api/v1/tokens`, { method: "POST" });
  if (response.status !== 201) throw new Error(`POST /api/v1/tokens answered ${response.status}`);
  const { token } = (await response.json()) as { token: string };
  return { token, userId: token.slice(3).split(".")[0] ?? "" };
}
