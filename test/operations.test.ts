import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import path from "node:path";
import { OPERATIONS } from "~/server/all-operations";
import type { AppContext } from "~/server/app-context";
import type { AnyOperation } from "~/server/operations";
import { handleOperation } from "~/server/rest/rest-route";
import { signApiToken } from "~/server/session/session";
import type { ProcedureMeta } from "~/server/trpc/init";
import { appRouter, createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { placePaidOrder } from "./support/scenarios";

/**
 * Every defined operation is mounted over both transports, and survives many
 * copies of one request at once over each: one business effect, one answer.
 * A new operation without a scenario here fails the first test.
 */
interface Scenario {
  /** A valid input for a new shopper (with whatever must exist first). */
  arrange(
    app: AppContext,
  ): Promise<{ userId: string; input: Record<string, unknown>; params: Record<string, string> }>;
  /** How many business objects the operation made for that input (must be 1 after any number of copies). */
  effects(database: TestDatabase, input: Record<string, unknown>, userId: string): Promise<number>;
}

const mug = [{ skuId: "SKU-MUG", quantity: 1 }];

async function placeOrder(app: AppContext, userId: string) {
  const order = await createCaller({ app, userId, requestId: randomUUID() }).orders.create({
    requestId: randomUUID(),
    items: mug,
  });
  return order.orderId;
}

const SCENARIOS: Record<string, Scenario> = {
  "order.create": {
    arrange: async () => ({
      userId: randomUUID(),
      input: { requestId: randomUUID(), items: mug },
      params: {},
    }),
    effects: async ({ sql }, _input, userId) =>
      (await sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`)[0]?.n,
  },
  "order.cancel": {
    arrange: async (app) => {
      const userId = randomUUID();
      const orderId = await placeOrder(app, userId);
      // An open payment, so every copy races to close it at MockPay first.
      await createCaller({ app, userId, requestId: randomUUID() }).payments.create({ orderId });
      return { userId, input: { orderId }, params: { orderId } };
    },
    effects: async ({ sql }, input) =>
      (
        await sql`SELECT count(*)::int AS n FROM orders o
                   WHERE o.id = ${String(input.orderId)} AND o.status = 'CLOSED'
                     AND NOT EXISTS (SELECT 1 FROM payment_order p WHERE p.order_id = o.id AND p.status <> 'CLOSED')`
      )[0]?.n,
  },
  "payment.create": {
    arrange: async (app) => {
      const userId = randomUUID();
      const orderId = await placeOrder(app, userId);
      return { userId, input: { orderId }, params: { orderId } };
    },
    effects: async ({ sql }, input) =>
      (await sql`SELECT count(*)::int AS n FROM payment_order WHERE order_id = ${String(input.orderId)}`)[0]
        ?.n,
  },
  "refund.create": {
    arrange: async (app) => {
      const paid = await placePaidOrder(app, mug);
      return {
        userId: paid.userId,
        input: { orderId: paid.orderId, refundNo: `R-${randomUUID()}`, amountCents: 100 },
        params: { orderId: paid.orderId },
      };
    },
    effects: async ({ sql }, input) =>
      (await sql`SELECT count(*)::int AS n FROM refund_order WHERE order_id = ${String(input.orderId)}`)[0]
        ?.n,
  },
};

const COPIES = 20;
const operations = OPERATIONS as readonly AnyOperation[];

describe("every defined operation", () => {
  test("has a concurrency scenario here", () => {
    expect(operations.map((op) => op.name).filter((name) => !SCENARIOS[name])).toEqual([]);
  });

  test("is mounted over tRPC (a procedure that mounts it)", () => {
    const mounted = Object.values(appRouter._def.procedures).map((procedure) => operationOf(procedure));
    for (const op of operations) expect(mounted, op.name).toContain(op.name);
  });

  test("is mounted over REST at the path it declares (a route file whose handler mounts it)", async () => {
    for (const op of operations) {
      expect(op.rest, `${op.name} declares a REST binding`).toBeDefined();
      const file = path.resolve("src/app", `.${op.rest?.path.replace(/\{(\w+)\}/g, "[$1]")}/route.ts`);
      expect(existsSync(file), `${file} exists`).toBe(true);
      const route = (await import(file)) as Record<string, { operation?: string }>;
      expect(route[op.rest?.method ?? "POST"]?.operation, file).toBe(op.name);
    }
  });
});

describe("a deprecated name", () => {
  test("checkout.createOrder is orders.create: one key under either name, one order", async ({
    app,
    database,
  }) => {
    const userId = randomUUID();
    const caller = createCaller({ app, userId, requestId: randomUUID() });
    const input = { requestId: randomUUID(), items: mug };
    const [first, ...copies] = await Promise.all([
      caller.orders.create(input),
      ...Array.from({ length: 10 }, (_, i) =>
        i % 2 ? caller.orders.create(input) : caller.checkout.createOrder(input),
      ),
    ]);
    for (const copy of copies) expect(copy.orderId).toBe(first?.orderId);
    const [{ n }] = (await database.sql`SELECT count(*)::int AS n FROM orders WHERE user_id = ${userId}`) as [
      { n: number },
    ];
    expect(n).toBe(1);
    expect(metaOf(appRouter.checkout.createOrder)?.deprecatedFor).toBe("orders.create");
  });
});

describe.each(operations.map((op) => [op.name, op] as const))(`%s, ${COPIES} copies at once`, (name, op) => {
  const scenario = SCENARIOS[name] as Scenario;

  test(`over tRPC: one effect, one answer`, async ({ app, database }) => {
    const { userId, input } = await scenario.arrange(app);
    const caller = createCaller({ app, userId, requestId: randomUUID() }) as unknown as Record<
      string,
      Record<string, (input: unknown) => Promise<Record<string, unknown>>>
    >;
    const [router, procedure] = trpcPathOf(op.name);
    const call = caller[router]?.[procedure];
    if (!call) throw new Error(`no procedure for ${op.name}`);
    const answers = await Promise.all(Array.from({ length: COPIES }, () => call(input)));
    expect(await scenario.effects(database, input, userId)).toBe(1);
    // Key order is not part of a tRPC answer (a replay comes back from jsonb, which orders keys its own way).
    const bodies = new Set(
      answers.map(({ replayed: _r, keyExpiresAt: _k, ...body }) =>
        JSON.stringify(Object.fromEntries(Object.entries(body).sort(([a], [b]) => a.localeCompare(b)))),
      ),
    );
    expect(bodies.size).toBe(1);
    expect(answers.filter((answer) => !answer.replayed).length).toBeLessThanOrEqual(1);
  });

  test(`over REST with one Idempotency-Key: one effect, one answer`, async ({ app, database }) => {
    const { userId, input, params } = await scenario.arrange(app);
    const token = signApiToken(userId, app.sessionSecret);
    const key = randomUUID();
    const deps = { app, tokensEnabled: true, logError: () => {} };
    // The body is the input less the path parameters and the client key (the header carries it).
    const body = { ...input };
    for (const field of [...Object.keys(params), op.key.kind === "client" ? op.key.field : ""])
      delete body[field];
    const responses = await Promise.all(
      Array.from({ length: COPIES }, () =>
        handleOperation(
          deps,
          op,
          new Request(`http://test${op.rest?.path}`, {
            method: "POST",
            headers: {
              authorization: `Bearer ${token}`,
              "idempotency-key": key,
              "content-type": "application/json",
            },
            body: JSON.stringify(body),
          }),
          params,
        ),
      ),
    );
    const answered = responses.filter((response) => response.status !== 409);
    expect(answered.map((response) => response.status)).toEqual(answered.map(() => op.rest?.status));
    const texts = new Set(await Promise.all(answered.map((response) => response.text())));
    expect(texts.size).toBe(1);
    expect(await scenario.effects(database, input, userId)).toBe(1);
  });
});

/** The router path of the procedure that mounts an operation, e.g. `orders.create` (not a deprecated name). */
function trpcPathOf(name: string): [string, string] {
  const found = Object.entries(appRouter._def.procedures).find(
    ([, procedure]) => operationOf(procedure) === name && !metaOf(procedure)?.deprecatedFor,
  );
  if (!found) throw new Error(`no procedure mounts ${name}`);
  const [router, procedure] = found[0].split(".");
  return [router ?? "", procedure ?? ""];
}

function metaOf(procedure: unknown): ProcedureMeta | undefined {
  return (procedure as { _def: { meta?: ProcedureMeta } })._def.meta;
}

function operationOf(procedure: unknown): string | undefined {
  return metaOf(procedure)?.operation?.name;
}
