import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ABSORBERS, type IdempotencyEvent } from "@exactly-once/idempotency";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findRouteFiles, parseRoute, type RouteEntry, RouteTable } from "~/host/route-table";
import type { AppContext } from "~/server/app-context";
import { createGateway, DEFAULT_GATEWAY_CONFIG, type GatewayRequest } from "~/server/gateway/gateway";
import { ReplayCache } from "~/server/operations";
import { testAppContext } from "./support/app-context";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * Known replays (docs/idempotency.md): once a replay of a key was answered, the same request text under the
 * same key is answered again from the replay cache's rendering, with no parsing, validation or hashing. It
 * must be the same answer, byte for byte, as the replay it was kept from; every other request (another body,
 * the same meaning written otherwise) takes the whole path; and every copy is still admitted by the gateway
 * and told to the observer.
 */
let t: TestDatabase;
let server: Server;
let port: number;
let previous: AppContext | undefined;
const events: IdempotencyEvent[] = [];
const admitted: GatewayRequest[] = [];
const globals = globalThis as unknown as { checkoutApp?: AppContext };

beforeAll(async () => {
  t = await createTestDatabase();
  const base = testAppContext(t.db);
  // Four copies of one key a minute pass the gateway; the fifth is turned away, known replay or not.
  const gateway = createGateway(t.db, {
    ...DEFAULT_GATEWAY_CONFIG,
    duplicatePoints: 4,
    duplicateWindowS: 60,
  });
  await gateway.ready();
  const app: AppContext = {
    ...base,
    idempotency: { ...base.idempotency, cache: new ReplayCache(), observe: (event) => events.push(event) },
    gateway: {
      ...gateway,
      admit: (request) => {
        admitted.push(request);
        return gateway.admit(request);
      },
      admitClient: (request) => gateway.admitClient(request),
    },
  };
  previous = globals.checkoutApp;
  globals.checkoutApp = app;
  const entries: RouteEntry[] = [];
  for (const { route, file } of findRouteFiles(path.resolve("src/app"))) {
    if (!["/api/v1/", "/api/trpc/"].some((prefix) => `${route}/`.startsWith(prefix))) continue;
    const module = (await import(pathToFileURL(file).href)) as RouteEntry["module"];
    entries.push({ route, segments: parseRoute(route), module });
  }
  const table = new RouteTable(entries);
  server = createServer((req, res) => {
    if (!table.serve(req, res, (err) => console.error("route error", err))) {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  globals.checkoutApp = previous;
  await new Promise((resolve) => server?.close(resolve));
  await t.drop();
});

/** An answer as text, with what differs between any two answers (its Date) left out. */
async function post(pathname: string, headers: Record<string, string>, body: string) {
  const response = await fetch(`http://127.0.0.1:${port}${pathname}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": "known-replay-test", ...headers },
    body,
  });
  const names = [...response.headers.keys()].filter((name) => name !== "date").sort();
  return {
    status: response.status,
    headers: Object.fromEntries(names.map((name) => [name, response.headers.get(name)])),
    body: await response.text(),
  };
}

const byKey = (key: string) =>
  events.filter((event) => event.key === key).map((event) => [event.outcome, event.absorbedBy]);

describe("REST", () => {
  let token: string;
  beforeAll(async () => {
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/tokens`, { method: "POST" });
    token = ((await response.json()) as { token: string }).token;
  });
  const order = (quantity = 1) => JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity }] });
  const headers = (key: string) => ({ authorization: `Bearer ${token}`, "idempotency-key": key });

  it("the second replay is the first replay's answer, byte for byte, from its rendering", async () => {
    const key = randomUUID();
    const first = await post("/api/v1/orders", headers(key), order());
    const replay = await post("/api/v1/orders", headers(key), order());
    const known = await post("/api/v1/orders", headers(key), order());
    expect(first.status).toBe(201);
    expect(replay.headers["idempotent-replayed"]).toBe("true");
    expect(known).toEqual(replay);
    expect(known.body).toBe(first.body);
    expect(await post("/api/v1/orders", headers(key), order())).toEqual(replay);
    expect(byKey(key)).toEqual([
      ["first", undefined],
      ["replayed", ABSORBERS.cache],
      ["replayed", ABSORBERS.known],
      ["replayed", ABSORBERS.known],
    ]);
    // Each copy went through the gateway, the known replays too (and were counted there): the fifth is refused,
    // and the observer is not told of a replay that was not answered.
    const fifth = await post("/api/v1/orders", headers(key), order());
    expect(fifth.status).toBe(429);
    expect(admitted.filter((request) => request.key === key)).toHaveLength(5);
    expect(byKey(key)).toHaveLength(4);
  });

  it("another body under the key is still refused (422); the same order written otherwise is replayed", async () => {
    const key = randomUUID();
    const first = await post("/api/v1/orders", headers(key), order());
    await post("/api/v1/orders", headers(key), order());
    const other = await post("/api/v1/orders", headers(key), order(2));
    expect(other.status).toBe(422);
    expect(other.body).toContain("IDEMPOTENCY_KEY_REUSED");
    const spaced = await post("/api/v1/orders", headers(key), ` ${order()}\n`);
    expect(spaced.status).toBe(201);
    expect(spaced.body).toBe(first.body);
    expect(byKey(key).map(([, by]) => by)).toEqual([
      undefined,
      ABSORBERS.cache,
      ABSORBERS.fingerprint,
      // Another text: the whole path, and its own rendering kept from then on.
      ABSORBERS.cache,
    ]);
  });

  it("another shopper's identical request under the same key is not answered from the first's rendering", async () => {
    const key = randomUUID();
    await post("/api/v1/orders", headers(key), order());
    await post("/api/v1/orders", headers(key), order());
    const stranger = await fetch(`http://127.0.0.1:${port}/api/v1/tokens`, { method: "POST" });
    const strangerToken = ((await stranger.json()) as { token: string }).token;
    const theirs = await post(
      "/api/v1/orders",
      { authorization: `Bearer ${strangerToken}`, "idempotency-key": key },
      order(),
    );
    expect(theirs.status).toBe(201);
    expect(theirs.headers["idempotent-replayed"]).toBeUndefined();
    expect(byKey(key).at(-1)).toEqual(["first", undefined]);
  });
});

describe("tRPC", () => {
  it("the second replay is the first replay's envelope, byte for byte, from its rendering", async () => {
    const visit = await post("/api/trpc/orders.create", {}, JSON.stringify({ json: { requestId: "x" } }));
    expect(visit.status).toBe(400);
    const cookie = (visit.headers["set-cookie"] ?? "").split(";")[0] ?? "";
    const key = randomUUID();
    const body = JSON.stringify({ json: { requestId: key, items: [{ skuId: "SKU-MUG", quantity: 1 }] } });
    const first = await post("/api/trpc/orders.create", { cookie }, body);
    const replay = await post("/api/trpc/orders.create", { cookie }, body);
    const known = await post("/api/trpc/orders.create", { cookie }, body);
    expect(first.status).toBe(200);
    expect(replay.body).toMatch(/"replayed":true/);
    expect(known).toEqual(replay);
    expect(await post("/api/trpc/orders.create", { cookie }, body)).toEqual(replay);
    expect(byKey(key)).toEqual([
      ["first", undefined],
      ["replayed", ABSORBERS.cache],
      ["replayed", ABSORBERS.known],
      ["replayed", ABSORBERS.known],
    ]);
    const fifth = await post("/api/trpc/orders.create", { cookie }, body);
    expect(fifth.status).toBe(429);
    expect(fifth.body).toContain("RATE_LIMITED");
    expect(admitted.filter((request) => request.key === key)).toHaveLength(5);
    expect(byKey(key)).toHaveLength(4);
  });
});
