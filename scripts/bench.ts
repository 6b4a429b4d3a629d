/**
 * `npm run bench`: throughput, latency, memory and correctness of the idempotent
 * paths, over real HTTP against the built app on a fresh database.
 *   --duration=S      seconds per load scenario (default 10)
 *   --warmup=S        seconds of warm-up on each path before measuring (default 3)
 *   --rounds=N        interleaved rounds of baseline and first execution (default 3)
 *   --connections=N   concurrent connections (default 20)
 *   --storm=N         copies in the duplicate storm (default 500)
 *   --orders=N        paid orders in the callback storm (default 100), 10 notifications each
 *   --tiny            a quick run that only proves the script works (CI)
 * Writes bench-results/latest.json and bench-results/latest.html.
 */
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import autocannon from "autocannon";
import { getEnv } from "~/env";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { DEFAULT_IDEMPOTENCY_CONFIG } from "~/server/idempotency";
import { createOrder } from "~/server/orders/create-order";
import { createPayment } from "~/server/payments/create-payment";
import { signBody } from "~/shared/provider-contract";
import { type AppProcess, startAppProcess } from "./lib/app-process";
import { ensureBuild } from "./lib/build";
import { CpuMeter, processCpuMs } from "./lib/cpu";
import { startThrowawayPostgres } from "./lib/embedded-postgres";
import { freePort } from "./lib/free-port";

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, "").split("=");
    return [k ?? "", v ?? "true"] as const;
  }),
);
const tiny = args.has("tiny");
const DURATION = Number(args.get("duration") ?? (tiny ? 1 : 10));
const WARMUP = Number(args.get("warmup") ?? (tiny ? 1 : 3));
const ROUNDS = Number(args.get("rounds") ?? (tiny ? 1 : 3));
const CONNECTIONS = Number(args.get("connections") ?? (tiny ? 4 : 20));
const STORM = Number(args.get("storm") ?? (tiny ? 50 : 500));
const PAID = Number(args.get("orders") ?? (tiny ? 5 : 100));
const SECRET = "whsec_bench_secret_0123456789";

interface Row {
  scenario: string;
  requestsPerSec: number;
  /** CPU per request of the app process(es) (for the floor: this process) and of PostgreSQL. */
  appCpuMs?: number;
  dbCpuMs?: number;
  p50Ms: number;
  p99Ms: number;
  peakRssMb: number | null;
  correctness: string;
  ok: boolean;
}

const log = (m: string) => console.log(`[bench] ${m}`);

function peakRssMb(child: ChildProcess): number | null {
  try {
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    const kb = Number(status.match(/VmHWM:\s+(\d+)/)?.[1]);
    return Number.isFinite(kb) ? Math.round(kb / 1024) : null;
  } catch {
    return null;
  }
}

async function startApp(databaseUrl: string): Promise<AppProcess> {
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
      DB_POOL_MAX: "20",
    },
  });
}

async function sessionCookie(url: string): Promise<string> {
  const response = await fetch(`${url}/api/trpc/catalog.list`);
  return (response.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
}

/** Several runs of one scenario as one: requests over total time, mean p50, worst p99. */
function combine(runs: autocannon.Result[]): autocannon.Result {
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

function run(opts: autocannon.Options): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

/** Keys handed to checkout.createOrder requests so far (in-flight ones at the end included). */
const sent = { count: 0 };
const CREATE_ORDER = "/api/trpc/checkout.createOrder";

function orderLoad(
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
  const settled = async (sql: string) => {
    let last = -1;
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const now = await count(sql);
      if (now === last) return now;
      last = now;
    }
    return last;
  };
  const rows: Row[] = [];
  const app = await startApp(url);
  cleanups.unshift(() => app.stop());
  try {
    const cookie = await sessionCookie(app.baseUrl);
    const userId = decodeURIComponent(cookie.split("=")[1] ?? "").split(".")[0] ?? "";
    const appCpu = () => processCpuMs(app.child.pid);
    const meter = () => new CpuMeter(appCpu);
    const total = (r: autocannon.Result) => r.requests.total;
    const add = (scenario: string, r: autocannon.Result, correctness: string, ok: boolean, cpu: CpuMeter) =>
      rows.push({
        scenario,
        requestsPerSec: Math.round(r.requests.average),
        ...cpu.perRequest(),
        p50Ms: r.latency.p50,
        p99Ms: r.latency.p99,
        peakRssMb: peakRssMb(app.child),
        correctness,
        ok: ok && r.non2xx === 0 && r.errors === 0,
      });

    // JIT, statement caches and pool connections warm up on a shopper of its own, for both paths alike.
    log(`warm-up: ${WARMUP}s on each path`);
    const warmCookie = await sessionCookie(app.baseUrl);
    for (const procedure of ["/api/bench/trpc/placeOrderUnprotected", CREATE_ORDER]) {
      const warmKeys = Array.from({ length: 50_000 }, () => randomUUID());
      await run({ ...orderLoad(app.baseUrl, warmCookie, warmKeys, 0, procedure), duration: WARMUP });
    }

    // 1 and 2 alternate in short rounds, so drift on a shared machine hits both alike.
    log(`1 + 2. baseline and first execution, ${ROUNDS} interleaved rounds of ${DURATION / ROUNDS}s each`);
    // The baseline has its own shopper, so its orders stay out of the counts below.
    const baselineCookie = await sessionCookie(app.baseUrl);
    const baselineRuns: autocannon.Result[] = [];
    const firstRuns: autocannon.Result[] = [];
    const baselineCpu = meter();
    const firstCpu = meter();
    sent.count = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const slice = { duration: DURATION / ROUNDS };
      const baselineKeys = Array.from({ length: 100_000 }, () => randomUUID());
      baselineRuns.push(
        await baselineCpu.measure(
          () =>
            run({
              ...orderLoad(
                app.baseUrl,
                baselineCookie,
                baselineKeys,
                0,
                "/api/bench/trpc/placeOrderUnprotected",
              ),
              ...slice,
            }),
          total,
        ),
      );
      const firstKeys = Array.from({ length: 100_000 }, () => randomUUID());
      firstRuns.push(
        await firstCpu.measure(() => run({ ...orderLoad(app.baseUrl, cookie, firstKeys), ...slice }), total),
      );
    }
    const baseline = combine(baselineRuns);
    add("1 baseline (no protection)", baseline, `${baseline.non2xx} errors`, true, baselineCpu);
    const first = combine(firstRuns);
    const created = await settled(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
    // autocannon stops with requests in flight: they may commit without being counted, never twice.
    add(
      "2 first execution",
      first,
      `${created} orders for ${first["2xx"]} answered / ${sent.count} sent`,
      created >= first["2xx"] && created <= sent.count,
      firstCpu,
    );

    log("3. replay: the same keys again");
    const replayKeys = (
      await db.$client<{ request_id: string }[]>`SELECT request_id FROM orders WHERE user_id = ${userId}`
    ).map((r) => r.request_id);
    const replayCpu = meter();
    const replay = await replayCpu.measure(() => run(orderLoad(app.baseUrl, cookie, replayKeys)), total);
    const afterReplay = await settled(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
    add(
      "3 replay",
      replay,
      `${afterReplay - created} new orders (must be 0)`,
      afterReplay === created,
      replayCpu,
    );

    log(`4. duplicate storm: ${STORM} concurrent copies of one key`);
    const stormKey = randomUUID();
    const started = Date.now();
    const latencies: number[] = [];
    const stormCpu = meter();
    const answers = await stormCpu.measure(
      () =>
        Promise.all(
          Array.from({ length: STORM }, async () => {
            const t0 = performance.now();
            const res = await fetch(`${app.baseUrl}/api/trpc/checkout.createOrder`, {
              method: "POST",
              headers: { "content-type": "application/json", cookie },
              body: JSON.stringify({
                json: { requestId: stormKey, items: [{ skuId: "SKU-MUG", quantity: 1 }] },
              }),
            });
            const body = (await res.json()) as { result?: { data: { json: { orderId: string } } } };
            latencies.push(performance.now() - t0);
            return { status: res.status, orderId: body.result?.data.json.orderId };
          }),
        ),
      () => STORM,
    );
    const stormSeconds = (Date.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const ids = new Set(answers.flatMap((a) => (a.orderId ? [a.orderId] : [])));
    const stormOrders = await count(`SELECT count(*)::int AS n FROM orders WHERE request_id = '${stormKey}'`);
    const conflicts = answers.filter((a) => a.status === 409).length;
    rows.push({
      scenario: `4 duplicate storm (${STORM})`,
      requestsPerSec: Math.round(STORM / stormSeconds),
      ...stormCpu.perRequest(),
      p50Ms: Math.round(latencies[Math.floor(latencies.length * 0.5)] ?? 0),
      p99Ms: Math.round(latencies[Math.floor(latencies.length * 0.99)] ?? 0),
      peakRssMb: peakRssMb(app.child),
      correctness: `${stormOrders} order, ${ids.size} distinct answer(s), ${conflicts} × 409`,
      ok: stormOrders === 1 && ids.size === 1 && answers.every((a) => a.status === 200 || a.status === 409),
    });

    log(`5. callback storm: ${PAID} orders × 10 concurrent signed notifications`);
    const payments: Awaited<ReturnType<typeof createPayment>>[] = [];
    for (let i = 0; i < PAID; i++) {
      const order = await createOrder(db, userId, {
        requestId: randomUUID(),
        items: [{ skuId: "SKU-MUG", quantity: 1 }],
      });
      const payment = await createPayment(
        db,
        userId,
        { orderId: order.orderId },
        {
          appId: "app_checkout_demo",
          webhookSecret: SECRET,
          baseUrl: app.baseUrl,
        },
      );
      payments.push(payment);
    }
    const cbStart = Date.now();
    const cbLatencies: number[] = [];
    let cbFailures = 0;
    const callbackCpu = meter();
    await callbackCpu.measure(
      () =>
        Promise.all(
          payments.map(async (p, i) => {
            const body = JSON.stringify({
              id: `evt_bench_${i}`,
              type: "payment.succeeded",
              app_id: "app_checkout_demo",
              out_trade_no: p.outTradeNo,
              transaction_id: `T_BENCH_${i}`,
              amount_cents: p.amountCents,
              currency: p.currency,
              created_at: new Date().toISOString(),
            });
            await Promise.all(
              Array.from({ length: 10 }, async () => {
                const t0 = performance.now();
                const res = await fetch(`${app.baseUrl}/api/payments/notify`, {
                  method: "POST",
                  headers: {
                    "content-type": "application/json",
                    "provider-signature": signBody(SECRET, body, Math.floor(Date.now() / 1000)),
                  },
                  body,
                });
                await res.text();
                cbLatencies.push(performance.now() - t0);
                if (res.status !== 200) cbFailures++;
              }),
            );
          }),
        ),
      () => PAID * 10,
    );
    const cbSeconds = (Date.now() - cbStart) / 1000;
    cbLatencies.sort((a, b) => a - b);
    const transitions = await count(
      `SELECT count(*)::int AS n FROM payment_order WHERE status = 'SUCCESS' AND out_trade_no IN (${payments.map((p) => `'${p.outTradeNo}'`).join(",")})`,
    );
    const events = await count(`SELECT count(*)::int AS n FROM outbox_event WHERE event_type = 'OrderPaid'`);
    rows.push({
      scenario: `5 callback storm (${PAID}×10)`,
      requestsPerSec: Math.round((PAID * 10) / cbSeconds),
      ...callbackCpu.perRequest(),
      p50Ms: Math.round(cbLatencies[Math.floor(cbLatencies.length * 0.5)] ?? 0),
      p99Ms: Math.round(cbLatencies[Math.floor(cbLatencies.length * 0.99)] ?? 0),
      peakRssMb: peakRssMb(app.child),
      correctness: `${transitions} transitions, ${events} events, ${cbFailures} non-200`,
      ok: transitions === PAID && events === PAID && cbFailures === 0,
    });

    log("6. two instances: first executions split across two app processes");
    const second = await startApp(url);
    cleanups.unshift(() => second.stop());
    const cookie2 = `checkout_session=${decodeURIComponent(cookie.split("=")[1] ?? "")}`;
    const twoKeys = Array.from({ length: 200_000 }, () => randomUUID());
    sent.count = 0;
    const before6 = await count(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
    const twoCpu = new CpuMeter(() => appCpu() + processCpuMs(second.child.pid));
    const [a, b] = await twoCpu.measure(
      () =>
        Promise.all([
          run({ ...orderLoad(app.baseUrl, cookie, twoKeys, 0), connections: Math.max(1, CONNECTIONS / 2) }),
          run({
            ...orderLoad(second.baseUrl, cookie2, twoKeys, 100_000),
            connections: Math.max(1, CONNECTIONS / 2),
          }),
        ]),
      ([x, y]) => x.requests.total + y.requests.total,
    );
    const after6 = await settled(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
    rows.push({
      scenario: "6 two instances",
      requestsPerSec: Math.round(a.requests.average + b.requests.average),
      ...twoCpu.perRequest(),
      p50Ms: Math.max(a.latency.p50, b.latency.p50),
      p99Ms: Math.max(a.latency.p99, b.latency.p99),
      peakRssMb: Math.max(peakRssMb(app.child) ?? 0, peakRssMb(second.child) ?? 0),
      correctness: `${after6 - before6} orders for ${a["2xx"] + b["2xx"]} answered / ${sent.count} sent`,
      ok:
        after6 - before6 >= a["2xx"] + b["2xx"] &&
        after6 - before6 <= sent.count &&
        a.non2xx + b.non2xx === 0,
    });

    log("7. database floor: the same idempotent transaction straight through postgres.js");
    const floorEnd = Date.now() + DURATION * 1000;
    let floorDone = 0;
    const floorLatencies: number[] = [];
    const floorUser = randomUUID();
    // The app side here is this process: the same createOrder, without HTTP.
    const floorCpu = new CpuMeter(() => {
      const own = process.cpuUsage();
      return (own.user + own.system) / 1000;
    });
    await floorCpu.measure(
      () =>
        Promise.all(
          Array.from({ length: CONNECTIONS }, async () => {
            while (Date.now() < floorEnd) {
              const t0 = performance.now();
              await createOrder(
                db,
                floorUser,
                { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] },
                {
                  idempotency: DEFAULT_IDEMPOTENCY_CONFIG,
                },
              );
              floorLatencies.push(performance.now() - t0);
              floorDone++;
            }
          }),
        ),
      () => floorDone,
    );
    floorLatencies.sort((x, y) => x - y);
    const floorOrders = await count(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${floorUser}'`);
    rows.push({
      scenario: "7 database floor (no HTTP)",
      requestsPerSec: Math.round(floorDone / DURATION),
      ...floorCpu.perRequest(),
      p50Ms: Math.round(floorLatencies[Math.floor(floorLatencies.length * 0.5)] ?? 0),
      p99Ms: Math.round(floorLatencies[Math.floor(floorLatencies.length * 0.99)] ?? 0),
      peakRssMb: Math.round(process.memoryUsage().rss / 1024 / 1024),
      correctness: `${floorOrders} orders for ${floorDone} calls`,
      ok: floorOrders === floorDone,
    });
  } finally {
    await closeDb(db);
    for (const cleanup of cleanups) await cleanup().catch(() => {});
  }
  report(rows);
}

function report(rows: Row[]) {
  const by = (prefix: string) => rows.find((r) => r.scenario.startsWith(prefix))?.requestsPerSec ?? 0;
  const ratios = {
    firstOverBaseline: by("2") / Math.max(1, by("1")),
    replayOverFirst: by("3") / Math.max(1, by("2")),
    firstOverDatabaseFloor: by("2") / Math.max(1, by("7")),
  };
  const table = [
    "| scenario | req/s | p50 ms | p99 ms | app CPU ms/req | db CPU ms/req | peak RSS MB | correctness |",
    "|---|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.requestsPerSec} | ${r.p50Ms} | ${r.p99Ms} | ${r.appCpuMs ?? "?"} | ${r.dbCpuMs ?? "?"} | ${r.peakRssMb ?? "?"} | ${r.ok ? "✓" : "✗"} ${r.correctness} |`,
    ),
  ].join("\n");
  console.log(`\n${table}\n`);
  console.log(
    `ratios: first/baseline ${ratios.firstOverBaseline.toFixed(2)} (target ≥ 0.8), replay/first ${ratios.replayOverFirst.toFixed(2)} (target ≥ 1.5), first/database floor ${ratios.firstOverDatabaseFloor.toFixed(2)} (target ≥ 0.5)`,
  );
  mkdirSync("bench-results", { recursive: true });
  const result = {
    at: new Date().toISOString(),
    parameters: { DURATION, CONNECTIONS, STORM, PAID },
    rows,
    ratios,
  };
  writeFileSync("bench-results/latest.json", JSON.stringify(result, null, 2));
  const max = Math.max(1, ...rows.map((r) => r.requestsPerSec));
  writeFileSync(
    "bench-results/latest.html",
    `<!doctype html><meta charset="utf-8"><title>bench</title><h1>Checkout benchmark</h1><p>${result.at}</p>${rows
      .map(
        (r) =>
          `<div style="font:14px sans-serif;margin:4px 0">${r.scenario}<div style="background:#0a5cd6;height:14px;width:${Math.round((r.requestsPerSec / max) * 600)}px"></div>${r.requestsPerSec} req/s · p99 ${r.p99Ms} ms · ${r.correctness}</div>`,
      )
      .join("")}`,
  );
  const failed = rows.filter((r) => !r.ok);
  if (failed.length > 0) {
    console.error(`correctness failed: ${failed.map((r) => r.scenario).join(", ")}`);
    process.exitCode = 1;
  }
}

main().catch((error: unknown) => {
  console.error("[bench] failed:", error);
  process.exitCode = 1;
});
