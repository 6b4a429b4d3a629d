import { randomUUID } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIRECT_PREFIXES, findRouteFiles } from "~/host/route-table";
import { config as proxyConfig } from "~/proxy";
import { type AppProcess, startAppProcess } from "../scripts/lib/app-process";
import {
  freePort,
  HttpShopper,
  TEST_SERVER_ADMIN_TOKEN,
  TEST_SERVER_SESSION_SECRET,
  TEST_SERVER_WEBHOOK_SECRET,
} from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The production server calls route handlers without Next's pipeline (src/host/server.ts).
 * These are the rules that keep that safe, checked rather than trusted.
 */
const HTTP_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
const directRoutes = findRouteFiles(path.resolve("src/app")).filter(({ route }) =>
  DIRECT_PREFIXES.some((prefix) => `${route}/`.startsWith(prefix)),
);

describe("the direct route table and Next agree", () => {
  // Next compiles a matcher like this one into a regular expression over the path.
  const proxied = (pathname: string) =>
    (proxyConfig.matcher as string[]).some((matcher) => new RegExp(`^${matcher}$`).test(pathname));

  it("the proxy never runs for a prefix served directly (it would be skipped there)", () => {
    for (const prefix of DIRECT_PREFIXES) expect(proxied(`${prefix}anything`), prefix).toBe(false);
    for (const { route } of directRoutes) expect(proxied(route), route).toBe(false);
  });

  it("the proxy runs for every page (so every page visitor gets a session)", () => {
    for (const page of [
      "/",
      "/orders/0b0e0f36-0000-4000-8000-000000000000",
      "/admin",
      "/provider/pay/P1",
      "/provider/admin",
    ]) {
      expect(proxied(page), page).toBe(true);
    }
  });

  it("every direct route file exports only HTTP method handlers (route segment config would be ignored)", async () => {
    expect(directRoutes.length).toBeGreaterThan(10);
    for (const { route, file } of directRoutes) {
      const exported = Object.keys(await import(pathToFileURL(file).href));
      expect(
        exported.filter((name) => !HTTP_METHODS.has(name)),
        `${route} exports only handlers`,
      ).toEqual([]);
    }
  });
});

describe("npm run dev (Next's development server, same route files)", () => {
  let database: TestDatabase;
  let dev: AppProcess;

  beforeAll(async () => {
    database = await createTestDatabase({ poolSize: 2 });
    dev = await startAppProcess({
      port: await freePort(),
      mode: "dev",
      capture: true,
      readyTimeoutMs: 120_000,
      env: {
        DATABASE_URL: database.url,
        LOG_LEVEL: "warn",
        WORKER_IN_APP: "false",
        IDEMPOTENCY_CLEANUP_INTERVAL_MS: "0",
        PAYMENT_QUERY_INTERVAL_MS: "0",
        PROVIDER_DELIVERY_POLL_MS: "0",
        // The gateway on, as in development: its store must work under Next's dev bundler too.
        GATEWAY_ENABLED: "true",
        GATEWAY_RATE_POINTS: "4",
        ADMIN_TOKEN: TEST_SERVER_ADMIN_TOKEN,
        PROVIDER_WEBHOOK_SECRET: TEST_SERVER_WEBHOOK_SECRET,
        SESSION_SECRET: TEST_SERVER_SESSION_SECRET,
      },
    });
  }, 150_000);
  afterAll(async () => {
    await dev?.stop(5_000);
    await database?.drop();
  });

  it("serves a page, the tRPC API, the REST API and MockPay's API", async () => {
    const shopper = new HttpShopper(dev.baseUrl);
    expect((await shopper.visit("/")).status).toBe(200);
    const input = { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] };
    const [first, again] = [
      await shopper.mutation("orders.create", input),
      await shopper.mutation("orders.create", input),
    ];
    expect(first.status).toBe(200);
    expect(again.body.result?.data.json.orderId).toBe(first.body.result?.data.json.orderId);
    expect((await fetch(`${dev.baseUrl}/api/v1/openapi.json`)).status).toBe(200);
    // MockPay's status query refuses an unsigned request: its route ran, and answered itself.
    expect((await fetch(`${dev.baseUrl}/provider/api/trades/P-none?app_id=x`)).status).toBe(401);
    const [orders] =
      await database.sql`SELECT count(*)::int AS n FROM orders WHERE request_id = ${input.requestId}`;
    expect(orders?.n).toBe(1);
  }, 120_000);

  it("the gateway works under the dev server: past the limit a shopper gets 429, and its store never fails", async () => {
    const shopper = new HttpShopper(dev.baseUrl);
    await shopper.visit("/");
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const answer = await shopper.mutation("orders.create", {
        requestId: randomUUID(),
        items: [{ skuId: "SKU-MUG", quantity: 1 }],
      });
      statuses.push(answer.status);
    }
    expect(statuses.slice(0, 4)).toEqual([200, 200, 200, 200]);
    expect(statuses.slice(4)).toEqual([429, 429]);
    expect(dev.output()).not.toContain("gateway store failed");
  }, 120_000);
});
