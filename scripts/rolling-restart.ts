/**
 * `npm run rolling-restart`: two app instances and an event worker behind HAProxy, shoppers ordering and paying
 * through it, and each instance restarted in turn while they do (SIGTERM: /readyz turns 503, HAProxy's check
 * takes the instance out, it serves through its grace, closes its listener, finishes what it has and exits 0;
 * then a new process on the same port, which HAProxy takes back once it is ready). Then it checks that no request
 * was answered 5xx or reset, that no order was made twice, and that every order, payment and confirmation a
 * shopper was told of is there. A client that does see a failure retries with the same key, as the shop's does,
 * and the failure is counted. Exits 1 when any check fails.
 *
 * On the embedded PostgreSQL (a throwaway server), or on a new database of DATABASE_URL's server. Needs HAProxy
 * (Debian's `haproxy`). Logs go to .data/rolling-restart/.
 *   --shoppers=N          shoppers ordering at once (8)
 *   --drain-grace-ms=N    the instances' HTTP_DRAIN_GRACE_MS (3000); with --drain-ms=N, their HTTP_DRAIN_MS
 *                         (10000): 0 and 0 show what a restart without a drain does to the shoppers
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getEnv } from "~/env";
import { createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { AppCluster } from "./lib/app-cluster";
import { ensureBuild } from "./lib/build";
import { startThrowawayPostgres } from "./lib/embedded-postgres";
import { exitWith } from "./lib/exit";
import { freePort } from "./lib/free-port";

const LOGS = ".data/rolling-restart";
const log = (message: string) => console.log(`[rolling-restart] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const arg = (name: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? undefined;
const SHOPPERS = Number(arg("shoppers") ?? 8);
/** How long an instance goes on serving after SIGTERM: well past HAProxy's check noticing (2 × 250 ms). */
const DRAIN_GRACE_MS = Number(arg("drain-grace-ms") ?? 3_000);
const DRAIN_MS = arg("drain-ms");
/** Load before the first restart, between the two, and after the second. */
const PAUSE_MS = 3_000;

interface Tally {
  /** Answers 5xx, resets, timeouts: each a failure the shopper saw (and retried). */
  failures: string[];
  /** Answers the client was asked to retry (429, or a copy waiting for its first). */
  retried: number;
  requests: number;
  orders: { userId: string; requestId: string; orderId: string }[];
  /** Payments confirmed at MockPay: the order must end up paid. */
  confirmed: string[];
}

async function main(): Promise<number> {
  if (spawnSync("haproxy", ["-v"]).status !== 0) {
    log("missing: haproxy. Install with: apt-get install -y haproxy");
    return 1;
  }
  await ensureBuild(log);
  rmSync(LOGS, { recursive: true, force: true });
  mkdirSync(LOGS, { recursive: true });
  const env = getEnv();
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const databaseUrl = await freshDatabase(env.DATABASE_URL, stops);
    await runMigrations(databaseUrl);
    const db = createDb(databaseUrl, { max: 2 });
    stops.unshift(() => db.$client.end({ timeout: 2 }));
    await seedCatalogue(db);
    await db.$client`UPDATE sku SET stock = 10000000, initial_stock = 10000000`;

    const appPorts = [await freePort(), await freePort()];
    const frontend = await freePort();
    const haproxy = startHaproxy(frontend, appPorts);
    stops.unshift(() => stopped(haproxy));
    const url = `http://127.0.0.1:${frontend}`;
    const apps = new AppCluster({
      databaseUrl,
      env: {
        SESSION_SECRET: env.SESSION_SECRET,
        PROVIDER_WEBHOOK_SECRET: env.PROVIDER_WEBHOOK_SECRET,
        ADMIN_TOKEN: env.ADMIN_TOKEN,
        HTTP_DRAIN_GRACE_MS: String(DRAIN_GRACE_MS),
        ...(DRAIN_MS === undefined ? {} : { HTTP_DRAIN_MS: DRAIN_MS }),
        // HAProxy adds X-Forwarded-For: each shopper has an address of its own, as on the internet.
        TRUST_PROXY: "loopback",
      },
      logDir: LOGS,
      log,
      loadBalancer: { url, appPorts },
    });
    stops.unshift(() => apps.stop());
    await apps.start();
    await until(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.ok === true, 20_000);
    log(`two instances behind HAProxy at ${url}; ${SHOPPERS} shoppers order and pay through it`);

    const tally: Tally = { failures: [], retried: 0, requests: 0, orders: [], confirmed: [] };
    let loading = true;
    // A shopper refused something it should not have been: a failure too (the others go on).
    const shoppers = Array.from({ length: SHOPPERS }, (_, i) =>
      shop(url, `10.77.0.${i + 1}`, tally, () => loading).catch((error: unknown) => {
        tally.failures.push(String(error).slice(0, 400));
      }),
    );
    await sleep(PAUSE_MS);
    const steps = [];
    for (const index of [0, 1]) {
      steps.push(await apps.restartApp(index));
      await sleep(PAUSE_MS);
    }
    loading = false;
    await Promise.all(shoppers);

    // Every payment confirmed at MockPay reaches the merchant (its notifications go through HAProxy too).
    const paid = async () =>
      Number(
        (
          await db.$client<{ n: number }[]>`
            SELECT count(*)::int AS n FROM payment_order WHERE out_trade_no IN ${db.$client(tally.confirmed)}
               AND status = 'SUCCESS'`
        )[0]?.n,
      );
    await until(async () => (await paid()) === tally.confirmed.length, 30_000);
    const orderIds = tally.orders.map((o) => o.orderId);
    const [counts] = await db.$client<{ orders: number; found: number; twice: number; paid_twice: number }[]>`
      SELECT (SELECT count(*)::int FROM orders) AS orders,
             (SELECT count(*)::int FROM orders WHERE id::text IN ${db.$client(orderIds)}) AS found,
             (SELECT count(*)::int FROM (SELECT 1 FROM orders GROUP BY user_id, request_id HAVING count(*) > 1) d) AS twice,
             (SELECT count(*)::int FROM (SELECT 1 FROM payment_order WHERE status = 'SUCCESS'
                                          GROUP BY user_id, order_id HAVING count(*) > 1) p) AS paid_twice`;
    const paidNow = await paid();
    const checks: [string, boolean][] = [
      [
        `both instances restarted and exited 0 (${steps.map((s) => s.exitCode).join(", ")})`,
        steps.every((s) => s.exitCode === 0),
      ],
      [`answers 5xx or reset: ${tally.failures.length}`, tally.failures.length === 0],
      [
        `orders made twice for one request: ${counts?.twice}; payments taken twice: ${counts?.paid_twice}`,
        counts?.twice === 0 && counts?.paid_twice === 0,
      ],
      [
        `acknowledged orders in the database: ${counts?.found} of ${orderIds.length} (and ${counts?.orders} in all)`,
        counts?.found === orderIds.length && counts?.orders === orderIds.length,
      ],
      [
        `confirmed payments applied: ${paidNow} of ${tally.confirmed.length}`,
        paidNow === tally.confirmed.length,
      ],
      [`orders placed while the instances restarted: ${orderIds.length}`, orderIds.length > 0],
    ];
    log(
      `${tally.requests} requests; restarts: ${steps.map((s, i) => `${"AB"[i]} stopped in ${s.stoppedMs} ms, back in ${s.tookMs} ms`).join("; ")}; ${tally.retried} answers asked the client to wait and retry`,
    );
    for (const failure of tally.failures.slice(0, 20)) log(`  failure: ${failure}`);
    for (const [what, ok] of checks) log(`${ok ? "ok  " : "FAIL"} ${what}`);
    return checks.every(([, ok]) => ok) ? 0 : 1;
  } finally {
    for (const stop of stops) await stop().catch(() => {});
  }
}

/** A new database on DATABASE_URL's server, or a throwaway embedded server's. Its URL. */
async function freshDatabase(serverUrl: string | undefined, stops: Array<() => Promise<unknown>>) {
  let adminUrl = serverUrl;
  if (!adminUrl) {
    const server = await startThrowawayPostgres("checkout-rolling-pg", ["-c", "max_connections=200"]);
    stops.unshift(server.stop);
    adminUrl = server.adminUrl;
  }
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  const name = `rolling_${Date.now()}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  stops.unshift(async () => {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * HAProxy in front of the instances: round robin, each checked on /readyz every 250 ms (out after two failed
 * checks, back after two 200s); a request whose connection fails before anything was sent goes to the other
 * instance.
 */
function startHaproxy(frontend: number, appPorts: number[]): ChildProcess {
  const config = path.join(LOGS, "haproxy.cfg");
  writeFileSync(
    config,
    `global
  maxconn 2000

defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout check 2s

listen app
  bind 127.0.0.1:${frontend}
  balance roundrobin
  option forwardfor
  option httpchk GET /readyz
  http-check expect status 200
  option redispatch
  retries 3
  retry-on conn-failure empty-response
  default-server inter 250ms fall 2 rise 2
${appPorts.map((port, i) => `  server app${"AB"[i]} 127.0.0.1:${port} check`).join("\n")}
`,
  );
  const child = spawn("haproxy", ["-f", config, "-db"], { stdio: ["ignore", "pipe", "pipe"] });
  const file = path.join(LOGS, "haproxy.log");
  child.stdout?.on("data", (chunk: Buffer) => appendFileSync(file, chunk));
  child.stderr?.on("data", (chunk: Buffer) => appendFileSync(file, chunk));
  return child;
}

/** One shopper: a session, then orders placed and paid one after another while `loading()`. */
async function shop(url: string, address: string, tally: Tally, loading: () => boolean): Promise<void> {
  let cookie = "";
  const from = (init: RequestInit = {}): RequestInit => ({
    ...init,
    headers: { ...(init.headers as Record<string, string>), "x-forwarded-for": address },
    signal: AbortSignal.timeout(15_000),
  });
  const call = async <T>(
    what: string,
    send: () => Promise<Response>,
    ok = [200],
  ): Promise<{ status: number; body: T }> => {
    let last = "";
    for (let attempt = 0; attempt < 100; attempt++) {
      tally.requests++;
      try {
        const response = await send();
        const text = await response.text();
        const set = response.headers.get("set-cookie");
        if (set && !cookie) cookie = set.split(";")[0] ?? "";
        if (ok.includes(response.status)) {
          const json = response.headers.get("content-type")?.includes("json");
          return { status: response.status, body: json && text ? JSON.parse(text) : (text as T) };
        }
        last = `${response.status} ${text.slice(0, 160)}`;
        if (response.status >= 500) tally.failures.push(`${what}: ${last}`);
        else if (response.status === 429 || response.status === 409) tally.retried++;
        else throw new Refused(`${what}: ${response.status} ${text.slice(0, 300)}`);
      } catch (error) {
        if (error instanceof Refused) throw error;
        last = String(error).slice(0, 160);
        tally.failures.push(`${what}: ${last}`);
      }
      await sleep(100);
    }
    throw new Refused(`${what}: no answer after 100 tries (the last: ${last})`);
  };
  const trpc = <T>(procedure: string, input: unknown) =>
    call<{ result: { data: { json: T } } }>(procedure, () =>
      fetch(
        `${url}/api/trpc/${procedure}`,
        from({
          method: "POST",
          headers: { "content-type": "application/json", cookie },
          body: JSON.stringify({ json: input }),
        }),
      ),
    ).then((answer) => answer.body.result.data.json);

  await call("catalog.list", () => fetch(`${url}/api/trpc/catalog.list`, from()));
  const userId = decodeURIComponent(cookie.split("=")[1] ?? "").split(".")[0] ?? "";
  while (loading()) {
    // One request id per order, reused by every retry of it.
    const requestId = randomUUID();
    const order = await trpc<{ orderId: string }>("orders.create", {
      requestId,
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    tally.orders.push({ userId, requestId, orderId: order.orderId });
    const payment = await trpc<{ outTradeNo: string; payUrl: string }>("payments.create", {
      orderId: order.orderId,
    });
    const payUrl = new URL(payment.payUrl, url);
    await call("MockPay's page", () => fetch(`${url}${payUrl.pathname}${payUrl.search}`, from()));
    await call(
      "MockPay's Confirm",
      () =>
        fetch(
          `${url}/provider/api/trades/${encodeURIComponent(payment.outTradeNo)}/confirm`,
          from({
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: payUrl.searchParams.toString(),
            redirect: "manual",
          }),
        ),
      [303],
    );
    tally.confirmed.push(payment.outTradeNo);
    await sleep(200);
  }
}

class Refused extends Error {}

async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) return;
    await sleep(200);
  }
}

function stopped(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

main().then(exitWith, (error: unknown) => {
  console.error("[rolling-restart] failed:", error);
  exitWith(1);
});
