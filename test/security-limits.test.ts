import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppServer, startAppServer } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * Limits a new identity does not defeat: per client address, on making identities and
 * on every write (the essay's gateway: ip + uri). X-Forwarded-For and -Proto are believed
 * only from a trusted proxy (TRUST_PROXY), never by default.
 */
let database: TestDatabase;
/** Behind a trusted proxy on loopback: each test speaks for its own client address. */
let proxied: AppServer;
/** No trusted proxy (the default): the socket's peer is the client, whatever the headers say. */
let direct: AppServer;

const LIMITS = {
  GATEWAY_ENABLED: "true",
  GATEWAY_IDENTITY_POINTS: "5",
  GATEWAY_CLIENT_WRITE_POINTS: "8",
  GATEWAY_RATE_POINTS: "30",
  GATEWAY_RATE_WINDOW_S: "60",
};

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 2 });
  [proxied, direct] = await Promise.all([
    startAppServer({ databaseUrl: database.url, env: { ...LIMITS, TRUST_PROXY: "loopback" } }),
    startAppServer({ databaseUrl: database.url, env: LIMITS }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([proxied?.stop(), direct?.stop()]);
  await database?.drop();
});

const from = (address: string) => ({ "x-forwarded-for": address });

async function newToken(server: AppServer, headers: Record<string, string>) {
  const response = await fetch(`${server.baseUrl}/api/v1/tokens`, { method: "POST", headers });
  return {
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    token: response.ok ? ((await response.json()) as { token: string }).token : undefined,
  };
}

function orderOver(server: AppServer, token: string, headers: Record<string, string>) {
  return fetch(`${server.baseUrl}/api/v1/orders`, {
    method: "POST",
    headers: {
      ...headers,
      authorization: `Bearer ${token}`,
      "idempotency-key": randomUUID(),
      "content-type": "application/json",
    },
    body: JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 1 }] }),
  });
}

describe("new identities", () => {
  it("one client address makes 5 a minute: of 20 token requests at once at most 5 are issued, the rest 429 with Retry-After", async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => newToken(proxied, from("203.0.113.1"))),
    );
    // The limit is 5 (the counters' store decides concurrent consumes; never more than the limit pass).
    const issued = answers.filter((a) => a.status === 201).length;
    expect(issued).toBeGreaterThanOrEqual(1);
    expect(issued).toBeLessThanOrEqual(5);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused).toHaveLength(20 - issued);
    expect(refused.every((a) => Number(a.retryAfter) >= 1)).toBe(true);
    // Another client is not held up by the first.
    expect((await newToken(proxied, from("203.0.113.2"))).status).toBe(201);
  });

  it("a guest session made by tRPC counts too: cookie-less calls get a session 5 times, then 429", async () => {
    const statuses: number[] = [];
    let cookies = 0;
    for (let i = 0; i < 8; i++) {
      const response = await fetch(`${proxied.baseUrl}/api/trpc/catalog.list`, {
        headers: from("203.0.113.3"),
      });
      statuses.push(response.status);
      if (response.headers.get("set-cookie")) cookies++;
    }
    expect(cookies).toBe(5);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  });

  it("a page visit past the limit is served without a session", async () => {
    for (let i = 0; i < 5; i++) await newToken(proxied, from("203.0.113.4"));
    const page = await fetch(`${proxied.baseUrl}/`, { headers: from("203.0.113.4") });
    expect(page.status).toBe(200);
    expect(page.headers.get("set-cookie")).toBeNull();
  });
});

describe("writes", () => {
  it("a new identity per request does not get past the limit per client address (at most 8 orders, not 20)", async () => {
    // 20 shoppers, made from four other addresses.
    const tokens: string[] = [];
    for (const address of ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"]) {
      for (let i = 0; i < 5; i++) {
        const { token } = await newToken(proxied, from(address));
        if (token) tokens.push(token);
      }
    }
    expect(tokens).toHaveLength(20);
    const answers = await Promise.all(tokens.map((token) => orderOver(proxied, token, from("203.0.113.10"))));
    const statuses = answers.map((a) => a.status);
    const placed = statuses.filter((s) => s === 201).length;
    expect(placed).toBeGreaterThanOrEqual(1);
    expect(placed).toBeLessThanOrEqual(8);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20 - placed);
    const [row] = await database.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM orders o JOIN order_item i ON i.order_id = o.id WHERE i.sku_id = 'SKU-MUG'`;
    expect(row?.n).toBe(placed);
  });

  it("every call of a tRPC batch is counted: a batch of 10 orders from one address makes at most 8", async () => {
    const session = await fetch(`${proxied.baseUrl}/api/trpc/catalog.list`, {
      headers: from("203.0.113.20"),
    });
    const cookie = (session.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
    const inputs = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [
        i,
        { json: { requestId: randomUUID(), items: [{ skuId: "SKU-ESPRESSO", quantity: 1 }] } },
      ]),
    );
    const response = await fetch(
      `${proxied.baseUrl}/api/trpc/${Array(10).fill("orders.create").join(",")}?batch=1`,
      {
        method: "POST",
        headers: { ...from("203.0.113.20"), cookie, "content-type": "application/json" },
        body: JSON.stringify(inputs),
      },
    );
    const results = (await response.json()) as {
      result?: unknown;
      error?: { json: { data: { code: string } } };
    }[];
    const made = results.filter((r) => r.result).length;
    expect(made).toBeGreaterThanOrEqual(1);
    expect(made).toBeLessThanOrEqual(8);
    expect(results.filter((r) => r.error?.json.data.code === "TOO_MANY_REQUESTS")).toHaveLength(10 - made);
  });
});

describe("trusting proxies", () => {
  it("by default X-Forwarded-For is not believed: 20 token requests claiming 20 addresses issue 5", async () => {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => newToken(direct, from(`192.0.2.${i + 1}`))),
    );
    // The server's own readiness check made a session from 127.0.0.1 too.
    expect(answers.filter((a) => a.status === 201).length).toBeLessThanOrEqual(5);
    expect(answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(15);
  });

  it("cookies are Secure when the client came over https through a trusted proxy, and only then", async () => {
    const headers = { ...from("203.0.113.30"), "x-forwarded-proto": "https" };
    const secure = await fetch(`${proxied.baseUrl}/api/trpc/catalog.list`, { headers });
    expect(secure.headers.get("set-cookie")).toMatch(/; Secure/);
    const page = await fetch(`${proxied.baseUrl}/`, {
      headers: { ...headers, "x-forwarded-for": "203.0.113.31" },
    });
    expect(page.headers.get("set-cookie")).toMatch(/; Secure/);
    const plain = await fetch(`${proxied.baseUrl}/api/trpc/catalog.list`, { headers: from("203.0.113.32") });
    expect(plain.headers.get("set-cookie")).not.toMatch(/Secure/);
    // Not through a trusted proxy: the header is the client's word, and not believed.
    const spoofed = await fetch(`${direct.baseUrl}/api/trpc/catalog.list`, {
      headers: { "x-forwarded-proto": "https" },
    });
    expect(spoofed.headers.get("set-cookie") ?? "").not.toMatch(/Secure/);
  });

  it("a client cannot set the address the server stamps on its request", async () => {
    for (let i = 0; i < 6; i++) {
      await fetch(`${proxied.baseUrl}/api/v1/tokens`, {
        method: "POST",
        headers: { ...from("203.0.113.40"), "x-checkout-client-address": `10.9.9.${i}` },
      });
    }
    expect((await newToken(proxied, from("203.0.113.40"))).status).toBe(429);
  });
});
