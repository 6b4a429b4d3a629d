import { randomUUID } from "node:crypto";
import { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppContext } from "~/server/app-context";
import { acquire, fingerprint } from "~/server/operations";
import { createOrderOperation } from "~/server/orders/create-order";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { createRefundOperation } from "~/server/refunds/create-refund";
import { getOrder } from "~/server/rest/handlers";
import type { RestDeps } from "~/server/rest/protocol";
import { handleOperation } from "~/server/rest/rest-route";
import { signApiToken } from "~/server/session/session";
import { createCaller } from "~/server/trpc/root";
import { fromWebRequest } from "~/shared/plain-http";
import { testAppContext } from "./support/app-context";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { placePaidOrder } from "./support/scenarios";

let t: TestDatabase;
let app: AppContext;
let rest: RestDeps;

beforeAll(async () => {
  t = await createTestDatabase();
  app = testAppContext(t.db);
  rest = { app, tokensEnabled: true, logError: () => {} };
});
afterAll(() => t.drop());

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "OK";
  } catch (error) {
    return error instanceof TRPCError ? error.code : String(error);
  }
}

async function effects(orderId: string) {
  const [row] = await t.sql`
    SELECT (SELECT count(*)::int FROM payment_order WHERE order_id = ${orderId}) AS payments,
           (SELECT count(*)::int FROM refund_order WHERE order_id = ${orderId}) AS refunds`;
  return row;
}

describe("another shopper's order", () => {
  it("cannot be read or acted on through tRPC", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const before = await effects(orderId);
    const mallory = createCaller({ app, userId: randomUUID(), requestId: randomUUID() });
    const answers = await Promise.all([
      code(mallory.orders.get({ orderId })),
      code(mallory.payments.timeline({ orderId })),
      code(mallory.payments.create({ orderId })),
      code(mallory.payments.checkStatus({ orderId })),
      code(mallory.refunds.list({ orderId })),
      code(mallory.refunds.create({ orderId, refundNo: `R-${randomUUID()}`, amountCents: 100 })),
    ]);
    expect(answers).toEqual(Array(6).fill("NOT_FOUND"));
    expect(await mallory.orders.list()).toEqual([]);
    expect(await effects(orderId)).toEqual(before);
  });

  it("cannot be read or acted on through REST", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const before = await effects(orderId);
    const token = signApiToken(randomUUID(), app.sessionSecret);
    const req = (method: string, body?: unknown) =>
      new Request(`http://test/api/v1/orders/${orderId}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          "idempotency-key": randomUUID(),
          "content-type": "application/json",
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const statuses = [
      (await getOrder(rest, fromWebRequest(req("GET")), orderId)).status,
      (await handleOperation(rest, createPaymentOperation, req("POST", {}), { orderId })).status,
      (
        await handleOperation(rest, createRefundOperation, req("POST", { amountCents: 100 }), {
          orderId: orderId,
        })
      ).status,
    ];
    expect(statuses).toEqual([404, 404, 404]);
    expect(await effects(orderId)).toEqual(before);
  });
});

describe("REST while the first request with a key is still running", () => {
  it("answers 409 with Retry-After and the key's expiry", async () => {
    const userId = randomUUID();
    const key = randomUUID();
    const body = { items: [{ skuId: "SKU-MUG", quantity: 1 }] };
    // Another request holds the key (claimed, not finished).
    await acquire(
      t.db,
      { scope: userId, bizType: "order.create", key },
      fingerprint("order.create", body),
      app.idempotency,
    );
    const impatient = { ...rest, app: { ...app, idempotency: { ...app.idempotency, waitMs: 100 } } };
    const answer = await handleOperation(
      impatient,
      createOrderOperation,
      new Request("http://test/api/v1/orders", {
        method: "POST",
        headers: {
          authorization: `Bearer ${signApiToken(userId, app.sessionSecret)}`,
          "idempotency-key": key,
          "content-type": "application/json",
        },
        body: JSON.stringify(body),
      }),
    );
    expect(answer.status).toBe(409);
    expect(answer.headers.get("retry-after")).toBe("1");
    expect(answer.headers.get("idempotency-key-expires")).toBeTruthy();
    expect(await answer.json()).toMatchObject({ code: "REQUEST_IN_PROGRESS", status: 409 });
    await t.sql`DELETE FROM idempotency_record WHERE idempotency_key = ${key}`;
  });
});
