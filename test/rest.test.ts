import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { MockPayContext } from "~/mockpay/server/context";
import { deleteExpiredRecords } from "~/server/operations";
import { createOrderOperation } from "~/server/orders/create-order";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { createRefundOperation } from "~/server/refunds/create-refund";
import { getOrder, postToken } from "~/server/rest/handlers";
import { openApiDocument } from "~/server/rest/openapi";
import type { RestDeps } from "~/server/rest/protocol";
import { handleOperation } from "~/server/rest/rest-route";
import { REVOCATION_CACHE_MS } from "~/server/session/api-tokens";
import { signApiToken } from "~/server/session/session";
import { createCaller } from "~/server/trpc/root";
import { fromWebRequest, toWebResponse } from "~/shared/plain-http";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";
import type { LoopbackApp } from "./support/loopback-app";
import { deliverAll } from "./support/scenarios";

/** The REST adapter, called with real Requests against real PostgreSQL. */
let t: TestDatabase;
let loop: LoopbackApp;
let deps: RestDeps;
let mockPay: MockPayContext;

// The database, and merchant and MockPay talking over loopback HTTP, come from the file's fixtures.
test.beforeAll(({ database, loopback }) => {
  t = database;
  loop = loopback;
  deps = { app: loop.app, tokensEnabled: true, logError: () => {} };
  mockPay = loop.mockPay;
});

async function newShopper(): Promise<string> {
  const response = toWebResponse(
    await postToken(deps, fromWebRequest(new Request("http://127.0.0.1/api/v1/tokens", { method: "POST" }))),
  );
  expect(response.status).toBe(201);
  return ((await response.json()) as { token: string }).token;
}

function request(path: string, init: { token?: string; key?: string; body?: unknown; method?: string } = {}) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.key !== undefined) headers["idempotency-key"] = init.key;
  return new Request(`http://test${path}`, {
    method: init.method ?? "POST",
    headers,
    body: init.method === "GET" ? undefined : JSON.stringify(init.body ?? {}),
  });
}

const mugs = { items: [{ skuId: "SKU-MUG", quantity: 2 }] };

/** Two mugs, with this bearer token and a new key. */
function orderWith(deps: RestDeps, token: string) {
  return handleOperation(
    deps,
    createOrderOperation,
    request("/api/v1/orders", { token, key: randomUUID(), body: mugs }),
  );
}

async function ordersOfToken(token: string): Promise<number> {
  const userId = token.slice(3).split(".")[0];
  const [row] = await t.sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId ?? ""}`;
  return row?.n ?? -1;
}

describe("POST /api/v1/orders with Idempotency-Key", () => {
  it("creates once and replays the original status, body and Location with Idempotent-Replayed", async () => {
    const token = await newShopper();
    const key = randomUUID();
    const first = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, key, body: mugs }),
    );
    expect(first.status).toBe(201);
    const body = await first.json();
    expect(body).toMatchObject({ status: "PENDING_PAYMENT", amountCents: 2500, currency: "USD" });
    expect(first.headers.get("location")).toBe(`/api/v1/orders/${body.orderId}`);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const expires = new Date(first.headers.get("idempotency-key-expires") ?? "");
    expect(expires.getTime()).toBeGreaterThan(Date.now());

    // The IETF draft's quoted form of the same key is the same key.
    const replay = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, key: `"${key}"`, body: mugs }),
    );
    expect(replay.status).toBe(201);
    expect(await replay.text()).toBe(JSON.stringify(body));
    expect(replay.headers.get("location")).toBe(first.headers.get("location"));
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.headers.get("idempotency-key-expires")).toBe(first.headers.get("idempotency-key-expires"));
    expect(await ordersOfToken(token)).toBe(1);
  });

  it("makes one order from 30 concurrent copies; the rest replay it or say 409 with Retry-After", async () => {
    const token = await newShopper();
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 30 }, () =>
        handleOperation(deps, createOrderOperation, request("/api/v1/orders", { token, key, body: mugs })),
      ),
    );
    const ids = new Set<string>();
    for (const answer of answers) {
      if (answer.status === 201) ids.add(((await answer.json()) as { orderId: string }).orderId);
      else {
        expect(answer.status).toBe(409);
        expect(answer.headers.get("retry-after")).toBeTruthy();
      }
    }
    expect(ids.size).toBe(1);
    expect(await ordersOfToken(token)).toBe(1);
  });

  it("refuses a missing key (400), a reused key with another body (422), bad input and bad tokens, writing nothing", async () => {
    const token = await newShopper();
    const missing = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, body: mugs }),
    );
    expect(missing.status).toBe(400);
    expect(missing.headers.get("content-type")).toBe("application/problem+json");
    expect(await missing.json()).toMatchObject({ status: 400, code: "IDEMPOTENCY_KEY_MISSING" });
    expect(
      (
        await handleOperation(
          deps,
          createOrderOperation,
          request("/api/v1/orders", { token, key: "short", body: mugs }),
        )
      ).status,
    ).toBe(400);

    const key = randomUUID();
    await handleOperation(deps, createOrderOperation, request("/api/v1/orders", { token, key, body: mugs }));
    const mismatch = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, key, body: { items: [{ skuId: "SKU-MUG", quantity: 3 }] } }),
    );
    expect(mismatch.status).toBe(422);
    expect(await mismatch.json()).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    // How long the key holds the other request's answer, as on every answer the key's record gave.
    expect(Date.parse(mismatch.headers.get("idempotency-key-expires") ?? "")).toBeGreaterThan(Date.now());

    const badBody = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", {
        token,
        key: randomUUID(),
        body: { items: [{ skuId: "SKU-MUG", quantity: 0 }] },
      }),
    );
    expect(badBody.status).toBe(400);
    expect(((await badBody.json()) as { detail: string }).detail).toContain("quantity");
    const notJson = new Request("http://test/api/v1/orders", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "idempotency-key": randomUUID() },
      body: "{nope",
    });
    expect((await handleOperation(deps, createOrderOperation, notJson)).status).toBe(400);

    expect(
      (
        await handleOperation(
          deps,
          createOrderOperation,
          request("/api/v1/orders", { key: randomUUID(), body: mugs }),
        )
      ).status,
    ).toBe(401);
    const forged = `${token.slice(0, -2)}xx`;
    expect(
      (
        await handleOperation(
          deps,
          createOrderOperation,
          request("/api/v1/orders", { token: forged, key: randomUUID(), body: mugs }),
        )
      ).status,
    ).toBe(401);
    expect(await ordersOfToken(token)).toBe(1);
  });

  it("replays a stored business rejection with its status", async () => {
    const token = await newShopper();
    const key = randomUUID();
    const body = { items: [{ skuId: "SKU-LIMITED", quantity: 9 }] };
    const first = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, key, body }),
    );
    expect(first.status).toBe(412);
    expect(first.headers.get("idempotency-key-expires")).toBeTruthy();
    const again = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, key, body }),
    );
    expect(again.status).toBe(412);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
  });

  it("once the key has expired and been cleaned up, answers with the same order (a replay of the business), still one order", async () => {
    const token = await newShopper();
    const key = randomUUID();
    const shortLived = { ...deps, app: { ...deps.app, idempotency: { ...deps.app.idempotency, ttlMs: 20 } } };
    const first = await handleOperation(
      shortLived,
      createOrderOperation,
      request("/api/v1/orders", { token, key, body: mugs }),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    await deleteExpiredRecords(t.db);
    const later = await handleOperation(
      shortLived,
      createOrderOperation,
      request("/api/v1/orders", { token, key, body: mugs }),
    );
    expect(later.status).toBe(201);
    // The record is gone, but the order's request id found the order the same request placed.
    expect(later.headers.get("idempotent-replayed")).toBe("true");
    expect(((await later.json()) as { orderId: string }).orderId).toBe(
      ((await first.json()) as { orderId: string }).orderId,
    );
    expect(await ordersOfToken(token)).toBe(1);
  });
});

describe("payments, refunds and reads over REST", () => {
  it("pays and refunds once per key, and keeps other shoppers out", async () => {
    const token = await newShopper();
    const order = await (
      await handleOperation(
        deps,
        createOrderOperation,
        request("/api/v1/orders", { token, key: randomUUID(), body: mugs }),
      )
    ).json();
    const path = `/api/v1/orders/${order.orderId}`;

    const payKey = randomUUID();
    const payments = await Promise.all(
      Array.from({ length: 10 }, () =>
        handleOperation(deps, createPaymentOperation, request(`${path}/payments`, { token, key: payKey }), {
          orderId: order.orderId,
        }),
      ),
    );
    const paid = await Promise.all(payments.filter((p) => p.status === 201).map((p) => p.json()));
    expect(new Set(paid.map((p) => p.outTradeNo)).size).toBe(1);

    // Pay at MockPay the way a browser would, and let the notifications arrive.
    const { payRequestSchema } = await import("~/shared/provider-contract");
    const { openTrade, confirmTrade } = await import("~/mockpay/server/trades");
    const { sig, ...payRequest } = payRequestSchema.parse(
      Object.fromEntries(new URL(paid[0].payUrl, "http://x").searchParams),
    );
    await openTrade(mockPay.db, payRequest, sig, loop.mockPay.webhookSecret);
    await confirmTrade(mockPay.db, loop.mockPay.appId, paid[0].outTradeNo);
    await deliverAll(mockPay);

    const refundKey = randomUUID();
    const refunds = await Promise.all(
      Array.from({ length: 10 }, () =>
        handleOperation(
          deps,
          createRefundOperation,
          request(`${path}/refunds`, { token, key: refundKey, body: { amountCents: 1000 } }),
          { orderId: order.orderId },
        ),
      ),
    );
    const accepted = await Promise.all(refunds.filter((r) => r.status === 201).map((r) => r.json()));
    expect(new Set(accepted.map((r) => r.refundNo)).size).toBe(1);
    const tooMuch = await handleOperation(
      deps,
      createRefundOperation,
      request(`${path}/refunds`, { token, key: randomUUID(), body: { amountCents: 2000 } }),
      { orderId: order.orderId },
    );
    expect(tooMuch.status).toBe(412);
    const reused = await handleOperation(
      deps,
      createRefundOperation,
      request(`${path}/refunds`, { token, key: refundKey, body: { amountCents: 999 } }),
      { orderId: order.orderId },
    );
    expect(reused.status).toBe(422);
    await deliverAll(mockPay);

    const read = toWebResponse(
      await getOrder(deps, fromWebRequest(request(path, { token, method: "GET" })), order.orderId),
    );
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({
      orderId: order.orderId,
      status: "PAID",
      payments: [{ status: "SUCCESS" }],
      refunds: [{ amountCents: 1000, status: "REFUND_SUCCESS" }],
    });

    const stranger = await newShopper();
    expect(
      (await getOrder(deps, fromWebRequest(request(path, { token: stranger, method: "GET" })), order.orderId))
        .status,
    ).toBe(404);
    expect(
      (
        await handleOperation(
          deps,
          createPaymentOperation,
          request(`${path}/payments`, { token: stranger, key: randomUUID() }),
          { orderId: order.orderId },
        )
      ).status,
    ).toBe(404);
    expect(
      (
        await handleOperation(
          deps,
          createRefundOperation,
          request(`${path}/refunds`, { token: stranger, key: randomUUID(), body: { amountCents: 1 } }),
          { orderId: order.orderId },
        )
      ).status,
    ).toBe(404);
    expect(
      (
        await getOrder(
          deps,
          fromWebRequest(request("/api/v1/orders/x", { token, method: "GET" })),
          "not-a-uuid",
        )
      ).status,
    ).toBe(404);
    const [count] =
      await t.sql`SELECT count(*)::int AS n FROM refund_order WHERE order_id = ${order.orderId}`;
    expect(count?.n).toBe(1);
  });

  it("makes tokens only when allowed, and a token is the signed shopper id", async () => {
    const off = await postToken(
      { ...deps, tokensEnabled: false },
      fromWebRequest(new Request("http://127.0.0.1/api/v1/tokens", { method: "POST" })),
    );
    expect(off.status).toBe(403);
    const id = randomUUID();
    const token = signApiToken(id, deps.app.sessionSecret);
    const answer = await handleOperation(
      deps,
      createOrderOperation,
      request("/api/v1/orders", { token, key: randomUUID(), body: mugs }),
    );
    expect(answer.status).toBe(201);
  });

  it("refuses a token once it expired or its shopper revoked every token, and takes one issued after", async () => {
    const id = randomUUID();
    const order = (token: string) => orderWith(deps, token);
    const stale = signApiToken(id, deps.app.sessionSecret, Date.now() - (deps.app.apiTokenTtlS + 1) * 1000);
    const expired = await order(stale);
    expect(expired.status).toBe(401);
    expect(((await expired.json()) as { detail: string }).detail).toMatch(/expire/);

    const shopper = createCaller({ app: deps.app, userId: id, requestId: "r" });
    const { token, expiresAt } = await shopper.session.issueApiToken();
    expect(expiresAt.getTime()).toBeGreaterThan(Date.now() + (deps.app.apiTokenTtlS - 60) * 1000);
    expect((await order(token)).status).toBe(201);
    // Revoked at once, whoever holds them; concurrent revocations are one.
    await Promise.all(Array.from({ length: 5 }, () => shopper.session.revokeAll()));
    expect((await order(token)).status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const fresh = await shopper.session.issueApiToken();
    expect((await order(fresh.token)).status).toBe(201);
    const [row] = await t.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM api_token_revocation WHERE user_id = ${id}`;
    expect(row?.n).toBe(1);
  });

  it("a revocation made on another instance is honoured here within REVOCATION_CACHE_MS", async () => {
    const id = randomUUID();
    const order = (token: string) => orderWith(deps, token);
    const { token } = await createCaller({
      app: deps.app,
      userId: id,
      requestId: "r",
    }).session.issueApiToken();
    expect((await order(token)).status).toBe(201);
    // Another instance revokes: this one learns it from the database once its second is up.
    await t.sql`INSERT INTO api_token_revocation (user_id, revoked_before) VALUES (${id}, clock_timestamp())`;
    await new Promise((resolve) => setTimeout(resolve, REVOCATION_CACHE_MS + 100));
    expect((await order(token)).status).toBe(401);
  });

  it("describes itself in an OpenAPI 3.1 document generated from the zod schemas", () => {
    const doc = openApiDocument();
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths ?? {})).toEqual(
      expect.arrayContaining([
        "/api/v1/orders",
        "/api/v1/orders/{orderId}",
        "/api/v1/orders/{orderId}/payments",
        "/api/v1/orders/{orderId}/refunds",
        "/api/v1/tokens",
      ]),
    );
    const schemas = doc.components?.schemas ?? {};
    expect(Object.keys(schemas)).toEqual(expect.arrayContaining(["CreateOrderRequest", "Order", "Problem"]));
    expect(JSON.stringify(schemas.CreateOrderRequest)).toContain('"maximum":99');
  });
});
