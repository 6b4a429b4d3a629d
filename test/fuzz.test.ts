import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AppContext } from "~/server/app-context";
import { createOrderOperation } from "~/server/orders/create-order";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { reconcile } from "~/server/reconciliation/reconcile";
import { createRefundOperation } from "~/server/refunds/create-refund";
import { getOrder } from "~/server/rest/handlers";
import type { RestDeps } from "~/server/rest/protocol";
import { handleOperation } from "~/server/rest/rest-route";
import { signApiToken, signSession } from "~/server/session/session";
import { handleTrpcRequest } from "~/server/trpc/handler";
import { fromWebRequest, toWebResponse } from "~/shared/plain-http";
import { signBody } from "~/shared/provider-contract";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";

/**
 * Random and malformed input at every public procedure and route: never a 500,
 * never a partial write (an order without items, a record pointing at nothing,
 * a payment moved by a bad notification).
 */
let t: TestDatabase;
let app: AppContext;
let rest: RestDeps;
const userId = randomUUID();
const cookie = () => `checkout_session=${signSession(userId, app.sessionSecret)}`;
const token = () => signApiToken(userId, app.sessionSecret);

// The database and the app's dependencies come from the file's fixtures (test/support/fixtures.ts).
test.beforeAll(({ database, app: wired }) => {
  t = database;
  app = wired;
  rest = { app, tokensEnabled: true, logError: () => {} };
});

const RUNS = 60;

/** Values a careless or hostile client might send where a field is expected. */
const junk = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.anything(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.anything(), { maxKeys: 3 }),
);
const skuId = fc.oneof(
  fc.constantFrom("SKU-MUG", "SKU-LIMITED", "SKU-NOPE", "", "sku mug", "'; --"),
  fc.string(),
);
const quantity = fc.oneof(fc.integer({ min: -5, max: 200 }), fc.double(), junk);
const key = fc.oneof(fc.uuid(), fc.string({ maxLength: 140 }), fc.constantFrom("short", "has space x", ""));
const orderInput = fc.oneof(
  fc.record({ requestId: key, items: fc.array(fc.record({ skuId, quantity }), { maxLength: 25 }) }),
  fc.record({ requestId: junk, items: junk }),
  junk,
);

async function partialWrites(): Promise<string[]> {
  const rows = await t.sql<{ problem: string }[]>`
    SELECT 'order without items: ' || o.id AS problem FROM orders o
     WHERE NOT EXISTS (SELECT 1 FROM order_item i WHERE i.order_id = o.id)
    UNION ALL
    SELECT 'SUCCESS record without its order: ' || r.idempotency_key FROM idempotency_record r
     WHERE r.biz_type = 'order.create' AND r.status = 'SUCCESS'
       AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id::text = r.biz_id)
    UNION ALL
    SELECT 'order total differs from its lines: ' || o.id FROM orders o
     WHERE o.amount_cents <> (SELECT coalesce(sum(line_total_cents), 0) FROM order_item i WHERE i.order_id = o.id)`;
  return rows.map((r) => r.problem);
}

function trpc(path: string, input: unknown, method: "GET" | "POST" = "POST", rawBody?: string) {
  const url =
    method === "GET"
      ? `http://test/api/trpc/${path}?input=${encodeURIComponent(JSON.stringify({ json: input }))}`
      : `http://test/api/trpc/${path}`;
  return handleTrpcRequest(
    app,
    new Request(url, {
      method,
      headers: { cookie: cookie(), "content-type": "application/json" },
      body: method === "POST" ? (rawBody ?? JSON.stringify({ json: input })) : undefined,
    }),
  );
}

describe("random and malformed input", () => {
  it("tRPC procedures answer every input without a 500 and without a partial write", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          "orders.create",
          "payments.create",
          "payments.checkStatus",
          "refunds.create",
          "orders.get",
          "payments.timeline",
          "refunds.list",
        ),
        fc.oneof(orderInput, fc.record({ orderId: fc.oneof(fc.uuid(), junk) }), junk),
        async (path, input) => {
          const query = path.endsWith(".get") || path.endsWith(".timeline") || path.endsWith(".list");
          const response = await trpc(path, input, query ? "GET" : "POST");
          expect(response.status).toBeLessThan(500);
        },
      ),
      { numRuns: RUNS },
    );
    const garbage = await trpc("orders.create", undefined, "POST", "{not json");
    expect(garbage.status).toBe(400);
    expect(await partialWrites()).toEqual([]);
  });

  it("REST routes answer every input without a 500 and without a partial write", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("orders", "payments", "refunds", "get"),
        fc.oneof(fc.uuid(), fc.string({ maxLength: 40 })),
        fc.option(key, { nil: undefined }),
        fc.oneof(
          fc.json(),
          fc.string(),
          orderInput.map((v) => JSON.stringify(v)),
        ),
        fc.boolean(),
        async (route, orderId, idempotencyKey, body, authorised) => {
          const headers: Record<string, string> = { "content-type": "application/json" };
          if (authorised) headers.authorization = `Bearer ${token()}`;
          if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
          let ok = true;
          for (const ch of idempotencyKey ?? "")
            if (ch.charCodeAt(0) < 32 || ch.charCodeAt(0) > 126) ok = false;
          if (!ok) return; // not a legal header value: fetch itself refuses it
          const req = new Request(`http://test/api/v1/orders/${encodeURIComponent(orderId)}`, {
            method: route === "get" ? "GET" : "POST",
            headers,
            body: route === "get" ? undefined : body,
          });
          const response =
            route === "orders"
              ? await handleOperation(rest, createOrderOperation, req)
              : route === "payments"
                ? await handleOperation(rest, createPaymentOperation, req, { orderId })
                : route === "refunds"
                  ? await handleOperation(rest, createRefundOperation, req, { orderId })
                  : toWebResponse(await getOrder(rest, fromWebRequest(req), orderId));
          expect(response.status).toBeLessThan(500);
          if (response.status >= 400) {
            expect(response.headers.get("content-type")).toBe("application/problem+json");
          }
        },
      ),
      { numRuns: RUNS },
    );
    expect(await partialWrites()).toEqual([]);
  });

  it("the notification endpoint refuses every forged or malformed body and changes no payment", async () => {
    const nowS = Math.floor(Date.now() / 1000);
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.json(), fc.string()),
        fc.oneof(
          fc.constant(null),
          fc.string(),
          fc.constantFrom(`t=${nowS},v1=${"a".repeat(64)}`, "t=,v1=", "v1=zz"),
        ),
        async (body, signature) => {
          const answer = await handlePaymentNotification(
            t.db,
            { body, signature, deliveryId: null },
            app.payments,
          );
          expect(answer.httpStatus).toBeGreaterThanOrEqual(400);
          expect(answer.httpStatus).toBeLessThan(500);
        },
      ),
      { numRuns: RUNS },
    );
    // Correctly signed but meaningless bodies: refused too, never a 500.
    await fc.assert(
      fc.asyncProperty(fc.json(), async (body) => {
        const answer = await handlePaymentNotification(
          t.db,
          {
            body,
            signature: signBody("notification", app.payments.webhookSecret, body, nowS),
            deliveryId: null,
          },
          app.payments,
        );
        expect(answer.httpStatus).toBeLessThan(500);
      }),
      { numRuns: RUNS },
    );
    const [moved] = await t.sql`SELECT count(*)::int AS n FROM payment_order WHERE status <> 'PENDING'`;
    expect(moved?.n).toBe(0);
    expect((await reconcile(t.db)).ok).toBe(true);
  });
});
