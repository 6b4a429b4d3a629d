import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import autocannon from "autocannon";
import { type AppProcess, startAppProcess } from "../app-process";
import { freePort } from "../free-port";
import { BENCH_ADMIN_TOKEN, BENCH_SESSION_SECRET, CONNECTIONS, DURATION, SECRET } from "./settings";

export function peakRssMb(child: ChildProcess): number | null {
  try {
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    const kb = Number(status.match(/VmHWM:\s+(\d+)/)?.[1]);
    return Number.isFinite(kb) ? Math.round(kb / 1024) : null;
  } catch {
    return null;
  }
}

export async function startApp(databaseUrl: string): Promise<AppProcess> {
  return startAppProcess({
    port: await freePort(),
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
    },
  });
}

export async function sessionCookie(url: string): Promise<string> {
  const response = await fetch(`${url}/api/trpc/catalog.list`);
  return (response.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
}

/** Several runs of one scenario as one: requests over total time, mean p50, worst p99. */
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

/** Keys handed to checkout.createOrder requests so far (in-flight ones at the end included). */
export const sent = { count: 0 };
export const CREATE_ORDER = "/api/trpc/checkout.createOrder";

export function orderLoad(
  url: string,
  cookie: string,
  keys: string[],
  start = 0,
  procedure = CREATE_ORDER,
): autocannon.Options {
  let i = start;
  return {
    url: `${url}${procedure}`,
    method: "POST",
    connections: CONNECTIONS,
    duration: DURATION,
    headers: { "content-type": "application/json", cookie },
    requests: [
      {
        setupRequest: (req) => {
          const key = keys[i++ % keys.length] ?? randomUUID();
          if (procedure === CREATE_ORDER) sent.count++;
          return {
            ...req,
            body: JSON.stringify({ json: { requestId: key, items: [{ skuId: "SKU-MUG", quantity: 1 }] } }),
          };
        },
      },
    ],
  };
}
