import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, vi } from "vitest";
import {
  findRouteFiles,
  parseRoute,
  type RouteEntry,
  type RouteHandler,
  RouteTable,
} from "~/host/route-table";
import type { AppContext } from "~/server/app-context";
import { signSession } from "~/server/session/session";
import { signBody } from "~/shared/provider-contract";
import { describe, expect, test } from "./support/fixtures";

/**
 * The production host calls a route's plain handler on Node's own request and response
 * (src/shared/plain-http.ts); `next dev` calls the same route file's Web handler. Two servers over one
 * database, one serving each way, are sent the same raw HTTP requests: every answer must be the same
 * bytes, save the Date header (and, for two first executions, the ids and clocks they made).
 */
const MERCHANT_API = ["/api/v1/", "/api/payments/", "/api/trpc/"];

type Host = { port: number; server: Server };
let plain: Host;
let web: Host;
let previous: AppContext | undefined;
const globals = globalThis as unknown as { checkoutApp?: AppContext };

async function listen(table: RouteTable): Promise<Host> {
  const server = createServer((req, res) => {
    if (!table.serve(req, res, (err) => console.error("route error", err))) {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

/** The route file's handlers without their plain form: what Next calls. */
function webOnly(entry: RouteEntry): RouteEntry {
  const module: Record<string, RouteHandler> = {};
  for (const [method, handler] of Object.entries(entry.module)) {
    module[method] = (req, context) => handler(req, context);
  }
  return { ...entry, module };
}

beforeAll(async () => {
  const entries: RouteEntry[] = [];
  for (const { route, file } of findRouteFiles(path.resolve("src/app"))) {
    if (!MERCHANT_API.some((prefix) => `${route}/`.startsWith(prefix))) continue;
    const module = (await import(pathToFileURL(file).href)) as RouteEntry["module"];
    entries.push({ route, segments: parseRoute(route), module });
  }
  expect(entries.filter((e) => Object.values(e.module).some((h) => h?.plain)).length).toBeGreaterThanOrEqual(
    7,
  );
  plain = await listen(new RouteTable(entries));
  web = await listen(new RouteTable(entries.map(webOnly)));
});

afterAll(async () => {
  globals.checkoutApp = previous;
  for (const host of [plain, web]) await new Promise((resolve) => host?.server.close(resolve));
});

test.beforeAll(({ app }) => {
  previous = globals.checkoutApp;
  globals.checkoutApp = app;
});

interface Raw {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/** One request on its own connection; the answer's bytes as the server wrote them, less its Date line. */
function send(host: Host, request: Raw): Promise<string> {
  const body = Buffer.from(request.body ?? "");
  const head = [
    `${request.method} ${request.path} HTTP/1.1`,
    "host: 127.0.0.1",
    "connection: close",
    "x-request-id: plain-host-test",
    ...Object.entries(request.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
    ...(request.body === undefined ? [] : [`content-length: ${body.length}`]),
  ].join("\r\n");
  return new Promise((resolve, reject) => {
    const socket = connect(host.port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("end", () =>
      resolve(
        Buffer.concat(chunks)
          .toString("latin1")
          .replace(/\r\ndate: [^\r]*/i, ""),
      ),
    );
    socket.on("error", reject);
    socket.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`), body]));
  });
}

function bodyOf(answer: string): string {
  return answer.slice(answer.indexOf("\r\n\r\n") + 4);
}

/** Both hosts, one after the other (the plain one first): their two answers. */
async function both(request: Raw | ((host: "plain" | "web") => Raw)) {
  const of = (name: "plain" | "web") => (typeof request === "function" ? request(name) : request);
  return { plain: await send(plain, of("plain")), web: await send(web, of("web")) };
}

/** What two first executions may differ in: the ids they made, the tokens and the clocks. */
function made(answer: string): string {
  return answer
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<id>")
    .replace(/"token":"[^"]*"/g, '"token":"<token>"')
    .replace(/"outTradeNo":"[^"]*"/g, '"outTradeNo":"<trade>"')
    .replace(/\/provider\/pay\/[^"]*/g, "/provider/pay/<link>")
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "<time>")
    .replace(/\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT/g, "<date>")
    .replace(/content-length: \d+/i, "content-length: <n>");
}

const json = (token: string, key?: string) => ({
  authorization: `Bearer ${token}`,
  "content-type": "application/json",
  ...(key ? { "idempotency-key": key } : {}),
});
const mugs = JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 1 }] });

describe("the production host (plain, on Node's objects) and the route files' Web handlers answer alike", () => {
  let token: string;
  let orderId: string;

  test("a new token (201), then the same bytes for every answer below", async () => {
    const answers = await both({ method: "POST", path: "/api/v1/tokens" });
    expect(answers.plain).toMatch(/^HTTP\/1\.1 201 /);
    expect(made(answers.plain)).toBe(made(answers.web));
    token = (JSON.parse(bodyOf(answers.plain)) as { token: string }).token;
  });

  test("an order's first execution, and its replay on either host", async () => {
    const keys = { plain: randomUUID(), web: randomUUID() };
    const first = await both((host) => ({
      method: "POST",
      path: "/api/v1/orders",
      headers: json(token, `"${keys[host]}"`),
      body: mugs,
    }));
    expect(first.plain).toMatch(/^HTTP\/1\.1 201 /);
    expect(made(first.plain)).toBe(made(first.web));
    orderId = /"orderId":"([^"]+)"/.exec(first.plain)?.[1] ?? "";

    const replay = await both({
      method: "POST",
      path: "/api/v1/orders",
      headers: json(token, keys.plain),
      body: mugs,
    });
    expect(replay.plain).toMatch(/^HTTP\/1\.1 201 [\s\S]*idempotent-replayed: true/);
    expect(replay.plain).toBe(replay.web);

    const read = await both({ method: "GET", path: `/api/v1/orders/${orderId}`, headers: json(token) });
    expect(read.plain).toMatch(/^HTTP\/1\.1 200 /);
    expect(read.plain).toBe(read.web);
  });

  const refusals: [string, () => Raw, RegExp][] = [
    [
      "no Idempotency-Key (400)",
      () => ({ method: "POST", path: "/api/v1/orders", headers: json(token), body: mugs }),
      /^HTTP\/1\.1 400 [\s\S]*IDEMPOTENCY_KEY_MISSING/,
    ],
    [
      "a malformed key (400)",
      () => ({
        method: "POST",
        path: "/api/v1/orders",
        headers: json(token, "no spaces allowed"),
        body: mugs,
      }),
      /^HTTP\/1\.1 400 [\s\S]*IDEMPOTENCY_KEY_INVALID/,
    ],
    [
      "a body that is not JSON (400)",
      () => ({ method: "POST", path: "/api/v1/orders", headers: json(token, randomUUID()), body: "{items:" }),
      /^HTTP\/1\.1 400 [\s\S]*MALFORMED_JSON/,
    ],
    [
      "a body with a byte-order mark and bad UTF-8 (400, read the same way)",
      () => ({
        method: "POST",
        path: "/api/v1/orders",
        headers: json(token, randomUUID()),
        body: `\ufeff{"items":[{"skuId":"SKU-\udc00","quantity":1}]}`,
      }),
      /^HTTP\/1\.1 [0-9]{3} /,
    ],
    [
      "an invalid body (400)",
      () => ({
        method: "POST",
        path: "/api/v1/orders",
        headers: json(token, randomUUID()),
        body: JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: -1 }] }),
      }),
      /^HTTP\/1\.1 400 [\s\S]*INVALID_INPUT/,
    ],
    [
      "no bearer token (401)",
      () => ({
        method: "POST",
        path: "/api/v1/orders",
        headers: { "idempotency-key": randomUUID() },
        body: mugs,
      }),
      /^HTTP\/1\.1 401 [\s\S]*www-authenticate/,
    ],
    [
      "an unknown order (404)",
      () => ({ method: "GET", path: `/api/v1/orders/${randomUUID()}`, headers: json(token) }),
      /^HTTP\/1\.1 404 /,
    ],
    [
      "a malformed order id (404)",
      () => ({ method: "POST", path: "/api/v1/orders/not-an-id/cancel", headers: json(token, randomUUID()) }),
      /^HTTP\/1\.1 404 /,
    ],
    [
      "an unsigned notification (401)",
      () => ({
        method: "POST",
        path: "/api/payments/notify",
        headers: { "content-type": "application/json" },
        body: "{}",
      }),
      /^HTTP\/1\.1 4\d\d /,
    ],
    [
      "a Standard Webhooks delivery, no key configured to check it (401)",
      () => ({
        method: "POST",
        path: "/api/payments/notify",
        headers: {
          "content-type": "application/json",
          "webhook-id": "msg_plain_host",
          "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
          "webhook-signature": "v1,AAAA",
        },
        body: "{}",
      }),
      /^HTTP\/1\.1 401 [\s\S]*UNSIGNED/,
    ],
    [
      "a body over the limit (413)",
      () => ({
        method: "POST",
        path: "/api/v1/orders",
        headers: json(token, randomUUID()),
        body: "x".repeat(70_000),
      }),
      /^HTTP\/1\.1 413 /,
    ],
    [
      "a method the route lacks (405)",
      () => ({ method: "PUT", path: "/api/v1/orders", headers: json(token) }),
      /^HTTP\/1\.1 405 /,
    ],
  ];
  for (const [name, request, expected] of refusals) {
    test(name, async () => {
      const answers = await both(request());
      expect(answers.plain).toMatch(expected);
      expect(answers.plain).toBe(answers.web);
    });
  }

  test("a key reused with another body (422), and a stored refusal replayed (412)", async () => {
    const key = randomUUID();
    await send(plain, { method: "POST", path: "/api/v1/orders", headers: json(token, key), body: mugs });
    const reused = await both({
      method: "POST",
      path: "/api/v1/orders",
      headers: json(token, key),
      body: JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 2 }] }),
    });
    expect(reused.plain).toMatch(/^HTTP\/1\.1 422 [\s\S]*IDEMPOTENCY_KEY_REUSED/);
    expect(reused.plain).toBe(reused.web);

    const scarce = randomUUID();
    const tooMany = JSON.stringify({ items: [{ skuId: "SKU-LIMITED", quantity: 50 }] });
    const first = await send(web, {
      method: "POST",
      path: "/api/v1/orders",
      headers: json(token, scarce),
      body: tooMany,
    });
    expect(first).toMatch(/^HTTP\/1\.1 412 [\s\S]*OUT_OF_STOCK/);
    const replayed = await both({
      method: "POST",
      path: "/api/v1/orders",
      headers: json(token, scarce),
      body: tooMany,
    });
    expect(replayed.plain).toMatch(/^HTTP\/1\.1 412 [\s\S]*idempotent-replayed: true/);
    expect(replayed.plain).toBe(replayed.web);
  });

  test("a payment, a cancel and a refund refused: first executions and replays", async () => {
    // One open payment per order: the first execution on one host, then the same key on both.
    const payKey = randomUUID();
    const pay = await send(plain, {
      method: "POST",
      path: `/api/v1/orders/${orderId}/payments`,
      headers: json(token, payKey),
    });
    expect(pay).toMatch(/^HTTP\/1\.1 201 /);
    const payAgain = await both({
      method: "POST",
      path: `/api/v1/orders/${orderId}/payments`,
      headers: json(token, payKey),
    });
    expect(payAgain.plain).toMatch(/^HTTP\/1\.1 201 [\s\S]*idempotent-replayed: true/);
    expect(payAgain.plain).toBe(payAgain.web);

    // A refund refused (nothing paid yet) is a stored refusal: the first answer, then its replay on both.
    const refundRequest = {
      method: "POST",
      path: `/api/v1/orders/${orderId}/refunds`,
      headers: json(token, randomUUID()),
      body: JSON.stringify({ amountCents: 100 }),
    };
    expect(await send(web, refundRequest)).toMatch(/^HTTP\/1\.1 412 [\s\S]*ORDER_NOT_REFUNDABLE/);
    const refund = await both(refundRequest);
    expect(refund.plain).toMatch(/^HTTP\/1\.1 412 [\s\S]*idempotent-replayed: true/);
    expect(refund.plain).toBe(refund.web);

    const cancelKey = randomUUID();
    const cancel = await send(plain, {
      method: "POST",
      path: `/api/v1/orders/${orderId}/cancel`,
      headers: json(token, cancelKey),
    });
    expect(cancel).toMatch(/^HTTP\/1\.1 200 /);
    const again = await both({
      method: "POST",
      path: `/api/v1/orders/${orderId}/cancel`,
      headers: json(token, cancelKey),
    });
    expect(again.plain).toMatch(/idempotent-replayed: true/);
    expect(again.plain).toBe(again.web);
  });

  test("a signed notification for an unknown trade, and signing the shopper out", async ({ app }) => {
    const body = JSON.stringify({ id: "n-plain-host", type: "payment.succeeded", out_trade_no: "nope" });
    const signed = (id: string) => ({
      method: "POST",
      path: "/api/payments/notify",
      headers: {
        "content-type": "application/json",
        "provider-signature": signBody(
          "notification",
          app.payments.webhookSecret,
          body.replace("n-plain-host", id),
          Math.floor(Date.now() / 1000),
        ),
        "provider-delivery-id": id,
      },
      body: body.replace("n-plain-host", id),
    });
    const notified = await both(signed("n-plain-host"));
    expect(notified.plain).toMatch(/^HTTP\/1\.1 \d{3} /);
    expect(notified.plain).toBe(notified.web);

    const signOut = await both({ method: "DELETE", path: "/api/v1/tokens", headers: json(token) });
    expect(signOut.plain).toMatch(/^HTTP\/1\.1 200 /);
    // The second host is told the token is already revoked: the same 401 the REST API gives then.
    expect(signOut.web).toMatch(/^HTTP\/1\.1 401 /);
    const after = await both({ method: "GET", path: `/api/v1/orders/${orderId}`, headers: json(token) });
    expect(after.plain).toMatch(/^HTTP\/1\.1 401 /);
    expect(after.plain).toBe(after.web);
  });
});

describe("tRPC: the production host's direct mutation path and tRPC's fetch adapter answer alike", () => {
  let cookie: string;
  const trpc = (path: string, input: unknown, headers: Record<string, string> = {}): Raw => ({
    method: "POST",
    path: `/api/trpc/${path}`,
    headers: { "content-type": "application/json", ...(cookie ? { cookie } : {}), ...headers },
    body: JSON.stringify({ json: input }),
  });
  const order = (requestId: string, quantity = 1) => ({
    requestId,
    items: [{ skuId: "SKU-MUG", quantity }],
  });

  test("a first visit without a cookie: a new shopper's session, and its order", async () => {
    const keys = { plain: randomUUID(), web: randomUUID() };
    const first = await both((host) => ({
      ...trpc("orders.create", order(keys[host])),
      headers: { "content-type": "application/json" },
    }));
    expect(first.plain).toMatch(/^HTTP\/1\.1 200 [\s\S]*set-cookie: checkout_session=/);
    const session = (answer: string) =>
      answer.replace(/checkout_session=[^;]*/g, "checkout_session=<session>");
    expect(session(made(first.plain))).toBe(session(made(first.web)));
    cookie = /set-cookie: (checkout_session=[^;]*)/.exec(first.plain)?.[1] ?? "";
  });

  test("first executions, then replays of one key on either host", async () => {
    const keys = { plain: randomUUID(), web: randomUUID() };
    const first = await both((host) => trpc("orders.create", order(keys[host])));
    expect(first.plain).toMatch(/^HTTP\/1\.1 200 /);
    expect(made(first.plain)).toBe(made(first.web));
    const replay = await both(trpc("orders.create", order(keys.web)));
    expect(replay.plain).toMatch(/"replayed":true/);
    expect(replay.plain).toBe(replay.web);
  });

  const cases: [string, () => Raw, RegExp][] = [
    [
      "invalid input (400, field errors)",
      () => trpc("orders.create", { requestId: "x", items: [] }),
      / 400 /,
    ],
    [
      "a key reused with another order (422)",
      () => trpc("orders.create", order(reusedKey, 2)),
      / 422 [\s\S]*IDEMPOTENCY_KEY_REUSED/,
    ],
    [
      "a stored refusal replayed (412)",
      () =>
        trpc("orders.create", {
          requestId: scarceKey,
          items: [{ skuId: "SKU-LIMITED", quantity: 50 }],
        }),
      / 412 [\s\S]*OUT_OF_STOCK/,
    ],
    ["an unknown procedure (404)", () => trpc("checkout.nothing", {}), / 404 /],
    ["a query sent as a POST (405)", () => trpc("catalog.list", undefined), / 405 /],
    ["a body that is not JSON (400)", () => ({ ...trpc("orders.create", {}), body: "{json:" }), / 400 /],
    ["an empty body (400)", () => ({ ...trpc("orders.create", {}), body: "" }), / 400 /],
    [
      "another content type (415)",
      () => ({
        ...trpc("orders.create", order(randomUUID())),
        headers: { "content-type": "text/plain", cookie },
      }),
      / 415 /,
    ],
    [
      "a batch of two (fetch adapter)",
      () => ({
        method: "POST",
        path: "/api/trpc/orders.create,orders.create?batch=1",
        headers: { "content-type": "application/json", cookie },
        body: JSON.stringify({ 0: { json: order(reusedKey) }, 1: { json: order(reusedKey) } }),
      }),
      / 200 /,
    ],
    [
      "a query (GET, fetch adapter)",
      () => ({ method: "GET", path: "/api/trpc/orders.list", headers: { cookie } }),
      / 200 /,
    ],
    [
      "a forged session cookie (a new shopper for it)",
      () => ({
        ...trpc("orders.list", undefined),
        method: "GET",
        body: undefined,
        headers: { cookie: "checkout_session=forged" },
      }),
      / 200 /,
    ],
  ];
  const reusedKey = randomUUID();
  const scarceKey = randomUUID();
  test("the keys the cases below reuse", async () => {
    expect(await send(plain, trpc("orders.create", order(reusedKey)))).toMatch(/ 200 /);
    expect(
      await send(
        web,
        trpc("orders.create", {
          requestId: scarceKey,
          items: [{ skuId: "SKU-LIMITED", quantity: 50 }],
        }),
      ),
    ).toMatch(/ 412 /);
  });
  for (const [name, request, expected] of cases) {
    test(name, async () => {
      const answers = await both(request());
      expect(answers.plain).toMatch(expected);
      const session = (answer: string) =>
        answer.replace(/checkout_session=[^;]*/g, "checkout_session=<session>");
      expect(session(made(answers.plain))).toBe(session(made(answers.web)));
    });
  }

  test("a refusal that says when to come back (429, Retry-After)", async ({ app, database }) => {
    const { createGateway, DEFAULT_GATEWAY_CONFIG } = await import("~/server/gateway/gateway");
    globals.checkoutApp = {
      ...app,
      gateway: createGateway(database.db, { ...DEFAULT_GATEWAY_CONFIG, duplicatePoints: 1 }),
    };
    try {
      const key = randomUUID();
      await send(plain, trpc("orders.create", order(key)));
      const limited = await both(trpc("orders.create", order(key)));
      expect(limited.plain).toMatch(/ 429 [\s\S]*retry-after: \d/);
      const clock = (answer: string) => answer.replace(/"retryAfterMs":\d+/, '"retryAfterMs":<ms>');
      expect(clock(limited.plain)).toBe(clock(limited.web));
    } finally {
      globals.checkoutApp = app;
    }
  });
});

test("a shop page's write is answered without a Web Request: the direct path does not hand it on", async ({
  app,
}) => {
  const { plainTrpc } = await import("~/server/trpc/handler");
  const handedOn = vi.fn(async () => new Request("http://127.0.0.1/"));
  const body = JSON.stringify({
    json: { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] },
  });
  const request = (url: string) => ({
    method: "POST",
    url,
    headers: new Headers({ "content-type": "application/json" }),
    text: async () => body,
    toWeb: handedOn,
  });
  const answer = await plainTrpc(app, request("/api/trpc/orders.create"));
  expect(answer.status).toBe(200);
  expect(handedOn).not.toHaveBeenCalled();
  // A batch is the fetch adapter's: handed on.
  await plainTrpc(app, request("/api/trpc/orders.create?batch=1")).catch(() => undefined);
  expect(handedOn).toHaveBeenCalledTimes(1);
});

test("a shop page's write mounts its operation: its input is read once, and a known replay reads it not at all", async ({
  app: base,
}) => {
  const { plainTrpc } = await import("~/server/trpc/handler");
  const { ReplayCache } = await import("~/server/operations");
  const app: AppContext = { ...base, idempotency: { ...base.idempotency, cache: new ReplayCache() } };
  const { createOrderOperation } = await import("~/server/orders/create-order");
  const schema = createOrderOperation.input;
  const reads = [
    vi.spyOn(schema, "parse"),
    vi.spyOn(schema, "safeParse"),
    vi.spyOn(schema, "parseAsync"),
    vi.spyOn(schema, "safeParseAsync"),
  ];
  const readsSoFar = () => reads.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
  const cookie = `checkout_session=${signSession(randomUUID(), app.sessionSecret)}`;
  const body = JSON.stringify({
    json: { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] },
  });
  const request = () => ({
    method: "POST",
    url: "/api/trpc/orders.create",
    headers: new Headers({ "content-type": "application/json", cookie }),
    text: async () => body,
    toWeb: async () => new Request("http://127.0.0.1/"),
  });
  try {
    const answers = [];
    const counts = [];
    for (let i = 0; i < 3; i++) {
      const before = readsSoFar();
      answers.push(await plainTrpc(app, request()));
      counts.push(readsSoFar() - before);
    }
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    // The first execution and the first replay each read the input once; the replay after it is known.
    expect(counts).toEqual([1, 1, 0]);
    expect(answers[2]?.body).toBe(answers[1]?.body);
  } finally {
    for (const spy of reads) spy.mockRestore();
  }
});

test("copies of a shop page's write sent at once over the plain host: one order, one answer", async ({
  app,
  database,
}) => {
  const { plainTrpc } = await import("~/server/trpc/handler");
  const userId = randomUUID();
  const cookie = `checkout_session=${signSession(userId, app.sessionSecret)}`;
  const body = JSON.stringify({
    json: { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] },
  });
  const answers = await Promise.all(
    Array.from({ length: 20 }, () =>
      plainTrpc(app, {
        method: "POST",
        url: "/api/trpc/orders.create",
        headers: new Headers({ "content-type": "application/json", cookie }),
        text: async () => body,
        toWeb: async () => new Request("http://127.0.0.1/"),
      }),
    ),
  );
  expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
  const orderIds = new Set(answers.map((answer) => JSON.parse(answer.body).result.data.json.orderId));
  expect(orderIds.size).toBe(1);
  const [{ n }] = (await database.sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`) as [
    { n: number },
  ];
  expect(n).toBe(1);
});
