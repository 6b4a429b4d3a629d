import { randomUUID } from "node:crypto";
import type { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getEnv } from "~/env";
import type { AppContext } from "~/server/app-context";
import { createGateway, DEFAULT_GATEWAY_CONFIG } from "~/server/gateway/gateway";
import { createOrderOperation } from "~/server/orders/create-order";
import { handleOperation } from "~/server/rest/rest-route";
import { signApiToken } from "~/server/session/session";
import { createCaller } from "~/server/trpc/root";
import { testAppContext } from "./support/app-context";
import { createTestDatabase, type TestDatabase } from "./support/database";

/** The gateway on a real PostgreSQL store, in front of the real procedures. */
let t: TestDatabase;
let app: AppContext;

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 30 });
  app = { ...testAppContext(t.db), gateway: createGateway(t.db, DEFAULT_GATEWAY_CONFIG) };
});
afterAll(() => t.drop());

const mug = [{ skuId: "SKU-MUG", quantity: 1 }];
const caller = (userId: string, context: AppContext = app) =>
  createCaller({ app: context, userId, requestId: randomUUID() });

async function orderCount(userId: string) {
  const [row] = await t.sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`;
  return row?.n ?? -1;
}

async function outcomes(calls: Promise<unknown>[]) {
  const settled = await Promise.allSettled(calls);
  return settled.map((s) => (s.status === "fulfilled" ? "OK" : (s.reason as TRPCError).code));
}

describe("gateway", () => {
  it("turns most of a storm of one request away with 429, and the shopper's next, different order still passes", async () => {
    const userId = randomUUID();
    const input = { requestId: randomUUID(), items: mug };
    const storm = await outcomes(Array.from({ length: 40 }, () => caller(userId).orders.create(input)));
    expect(storm.filter((o) => o === "TOO_MANY_REQUESTS").length).toBeGreaterThanOrEqual(30);
    expect(storm.every((o) => o === "OK" || o === "TOO_MANY_REQUESTS" || o === "CONFLICT")).toBe(true);
    expect(await orderCount(userId)).toBe(1);

    const next = await caller(userId).orders.create({ requestId: randomUUID(), items: mug });
    expect(next.replayed).toBe(false);
    expect(await orderCount(userId)).toBe(2);
  });

  it("never rejects the client's retry pattern: the same key with backoff", async () => {
    const userId = randomUUID();
    const input = { requestId: randomUUID(), items: mug };
    const answers = [];
    // A double click, then the client's automatic retries (300, 600, 1200 ms).
    answers.push(
      ...(await outcomes([caller(userId).orders.create(input), caller(userId).orders.create(input)])),
    );
    for (const pause of [300, 600, 1200]) {
      await new Promise((resolve) => setTimeout(resolve, pause));
      answers.push(...(await outcomes([caller(userId).orders.create(input)])));
    }
    expect(answers.every((a) => a === "OK" || a === "CONFLICT")).toBe(true);
    expect(await orderCount(userId)).toBe(1);
  });

  it("limits distinct requests per shopper and route, with a Retry-After, without touching other shoppers", async () => {
    const userId = randomUUID();
    const tight = {
      ...app,
      gateway: createGateway(t.db, { ...DEFAULT_GATEWAY_CONFIG, ratePoints: 3, rateWindowS: 30 }),
    };
    const results = await outcomes(
      Array.from({ length: 5 }, () =>
        caller(userId, tight).orders.create({ requestId: randomUUID(), items: mug }),
      ),
    );
    expect(results.filter((r) => r === "OK")).toHaveLength(3);
    expect(results.filter((r) => r === "TOO_MANY_REQUESTS")).toHaveLength(2);
    const other = await caller(randomUUID(), tight).orders.create({
      requestId: randomUUID(),
      items: mug,
    });
    expect(other.replayed).toBe(false);

    const token = signApiToken(userId, app.sessionSecret);
    const rest = await handleOperation(
      { app: tight, tokensEnabled: true, logError: () => {} },
      createOrderOperation,
      new Request("http://test/api/v1/orders", {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "idempotency-key": randomUUID(),
          "content-type": "application/json",
        },
        body: JSON.stringify({ items: mug }),
      }),
    );
    expect(rest.status).toBe(429);
    expect(Number(rest.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await rest.json()).toMatchObject({ code: "RATE_LIMITED", status: 429 });
    expect(await orderCount(userId)).toBe(3);
  });

  it("says which limit turned a request away: the duplicate window for copies of one key, the rate limit for distinct ones", async () => {
    const rejections: { by: string; key?: string }[] = [];
    const gateway = createGateway(
      t.db,
      { ...DEFAULT_GATEWAY_CONFIG, duplicatePoints: 1, ratePoints: 2, rateWindowS: 30 },
      () => {},
      (rejection) => rejections.push(rejection),
    );
    const userId = randomUUID();
    await gateway.admit({ userId, route: "order.create", key: "k1" });
    await expect(gateway.admit({ userId, route: "order.create", key: "k1" })).rejects.toThrow();
    await gateway.admit({ userId, route: "order.create", key: "k2" });
    await expect(gateway.admit({ userId, route: "order.create", key: "k3" })).rejects.toThrow();
    expect(rejections.map((r) => [r.key, r.by])).toEqual([
      ["k1", "the gateway's duplicate window (429: more than 1 copies of one key in 1 s)"],
      ["k3", "the gateway's rate limit (429: more than 2 requests per shopper and operation in 30 s)"],
    ]);
  });

  it("is not the authority: disabled, the same storm still makes one order", async () => {
    const userId = randomUUID();
    const open = { ...app, gateway: createGateway(t.db, { ...DEFAULT_GATEWAY_CONFIG, enabled: false }) };
    const input = { requestId: randomUUID(), items: mug };
    const storm = await outcomes(Array.from({ length: 40 }, () => caller(userId, open).orders.create(input)));
    expect(storm.includes("TOO_MANY_REQUESTS")).toBe(false);
    expect(await orderCount(userId)).toBe(1);
  });

  it("lets requests through when its own store fails", async () => {
    const { createDb, closeDb } = await import("~/server/db/client");
    const broken = createDb("postgres://postgres:password@127.0.0.1:1/nowhere", { max: 1 });
    const failures: unknown[] = [];
    try {
      const gateway = createGateway(broken, DEFAULT_GATEWAY_CONFIG, (err) => failures.push(err));
      await gateway.admit({ userId: randomUUID(), route: "orders.create", key: "k-12345678" });
    } finally {
      await closeDb(broken);
    }
    expect(failures).toHaveLength(1);
  });
});

const redisUrl = getEnv().REDIS_URL;

describe.runIf(redisUrl)("gateway with its counters in Redis (REDIS_URL)", () => {
  it("absorbs a storm, passes the next different order, and lets requests through when Redis is away", async () => {
    const gateway = createGateway(t.db, { ...DEFAULT_GATEWAY_CONFIG, redisUrl });
    const withRedis = { ...app, gateway };
    await gateway.ready();
    try {
      const userId = randomUUID();
      const input = { requestId: randomUUID(), items: mug };
      const storm = await outcomes(
        Array.from({ length: 40 }, () => caller(userId, withRedis).orders.create(input)),
      );
      expect(storm.filter((o) => o === "TOO_MANY_REQUESTS").length).toBeGreaterThanOrEqual(30);
      expect(await orderCount(userId)).toBe(1);
      const next = await caller(userId, withRedis).orders.create({
        requestId: randomUUID(),
        items: mug,
      });
      expect(next.replayed).toBe(false);
    } finally {
      await gateway.close();
    }
    const failures: unknown[] = [];
    const away = createGateway(t.db, { ...DEFAULT_GATEWAY_CONFIG, redisUrl: "redis://127.0.0.1:1" }, (err) =>
      failures.push(err),
    );
    try {
      await away.admit({ userId: randomUUID(), route: "order.create", key: "k-12345678" });
    } finally {
      await away.close();
    }
    expect(failures.length).toBeGreaterThan(0);
  });
});
