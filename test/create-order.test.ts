import { randomUUID } from "node:crypto";
import { TRPCError } from "@trpc/server";
import { describe, expect, it } from "vitest";
import type { AppContext } from "~/server/app-context";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { batchStatsOf, deleteExpiredRecords, fingerprint } from "~/server/operations";
import { createOrder } from "~/server/orders/create-order";
import { createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";

let t: TestDatabase;
let app: AppContext;

// The database and the app's dependencies come from the file's fixtures (test/support/fixtures.ts).
test.beforeAll(({ database, app: wired }) => {
  t = database;
  app = wired;
});

const shopper = () => randomUUID();
const caller = (userId: string) => createCaller({ app, userId, requestId: randomUUID() });
const mug = (quantity = 2) => [{ skuId: "SKU-MUG", quantity }];

async function counts(userId: string) {
  const [row] = await t.sql<{ orders: number; items: number; records: number }[]>`
    SELECT (SELECT count(*)::int FROM orders WHERE user_id = ${userId}) AS orders,
           (SELECT count(*)::int FROM order_item i JOIN orders o ON o.id = i.order_id
             WHERE o.user_id = ${userId}) AS items,
           (SELECT count(*)::int FROM idempotency_record WHERE user_id = ${userId}) AS records`;
  return row;
}

async function trpcCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof TRPCError) return error.code;
    throw error;
  }
  throw new Error("expected the call to fail");
}

describe("orders.create", () => {
  it("answers the same request twice with one order", async () => {
    const userId = shopper();
    const input = { requestId: randomUUID(), items: mug() };
    const first = await caller(userId).orders.create(input);
    const second = await caller(userId).orders.create(input);
    expect(first).toMatchObject({ status: "PENDING_PAYMENT", amountCents: 2500, replayed: false });
    expect(second).toEqual({ ...first, replayed: true });
    expect(await counts(userId)).toEqual({ orders: 1, items: 1, records: 1 });
  });

  it("makes one order from 50 concurrent copies through the procedure", async () => {
    const userId = shopper();
    const input = { requestId: randomUUID(), items: [...mug(1), { skuId: "SKU-ESPRESSO", quantity: 2 }] };
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, () => caller(userId).orders.create(input)),
    );
    const orderIds = new Set<string>();
    for (const result of results) {
      if (result.status === "fulfilled") orderIds.add(result.value.orderId);
      else expect((result.reason as TRPCError).code).toBe("CONFLICT");
    }
    expect(orderIds.size).toBe(1);
    expect(await counts(userId)).toEqual({ orders: 1, items: 2, records: 1 });
  });

  it("places 40 orders × 3 concurrent copies through the procedure, sharing transactions: 40 orders, 40 records", async () => {
    const userId = shopper();
    const before = batchStatsOf(app.db);
    const inputs = Array.from({ length: 40 }, (_, i) => ({
      requestId: randomUUID(),
      items: mug(1 + (i % 3)),
    }));
    const results = await Promise.all(
      inputs.flatMap((input) => [0, 1, 2].map(() => caller(userId).orders.create(input))),
    );
    // Every copy of a request got its order, and no two requests share one.
    const byRequest = new Map<string, Set<string>>();
    results.forEach((result, i) => {
      const requestId = inputs[Math.floor(i / 3)]?.requestId ?? "";
      byRequest.set(requestId, (byRequest.get(requestId) ?? new Set()).add(result.orderId));
    });
    expect([...byRequest.values()].every((ids) => ids.size === 1)).toBe(true);
    expect(new Set(results.map((r) => r.orderId)).size).toBe(40);
    expect(await counts(userId)).toEqual({ orders: 40, items: 40, records: 40 });
    // The app batches first executions of orders without a coupon (IDEMPOTENCY_BATCH_SIZE): some here shared one.
    expect(batchStatsOf(app.db).calls).toBeGreaterThan(before.calls);
  });

  it("treats the same items in another order or split over lines as the same request", async () => {
    const userId = shopper();
    const requestId = randomUUID();
    const first = await caller(userId).orders.create({
      requestId,
      items: [
        { skuId: "SKU-MUG", quantity: 2 },
        { skuId: "SKU-ESPRESSO", quantity: 1 },
      ],
    });
    const reordered = await caller(userId).orders.create({
      requestId,
      items: [
        { skuId: "SKU-ESPRESSO", quantity: 1 },
        { skuId: "SKU-MUG", quantity: 2.0 },
      ],
    });
    const split = await caller(userId).orders.create({
      requestId,
      items: [
        { skuId: "SKU-MUG", quantity: 1 },
        { skuId: "SKU-ESPRESSO", quantity: 1 },
        { skuId: "SKU-MUG", quantity: 1 },
      ],
    });
    expect(reordered).toEqual({ ...first, replayed: true });
    expect(split).toEqual({ ...first, replayed: true });
    expect((await counts(userId))?.orders).toBe(1);
  });

  it("rejects a reused key with a different payload and writes nothing", async () => {
    const userId = shopper();
    const requestId = randomUUID();
    await caller(userId).orders.create({ requestId, items: mug(2) });
    expect(await trpcCode(caller(userId).orders.create({ requestId, items: mug(3) }))).toBe(
      "UNPROCESSABLE_CONTENT",
    );
    expect(await counts(userId)).toEqual({ orders: 1, items: 1, records: 1 });
    const [order] = await t.sql`SELECT amount_cents FROM orders WHERE user_id = ${userId}`;
    expect(Number(order?.amount_cents)).toBe(2500);
  });

  it("stores and replays a business rejection: out of stock, unknown SKU", async () => {
    const userId = shopper();
    const soldOut = { requestId: randomUUID(), items: [{ skuId: "SKU-LIMITED", quantity: 4 }] };
    expect(await trpcCode(caller(userId).orders.create(soldOut))).toBe("PRECONDITION_FAILED");
    expect(await trpcCode(caller(userId).orders.create(soldOut))).toBe("PRECONDITION_FAILED");
    const unknown = { requestId: randomUUID(), items: [{ skuId: "SKU-NOPE", quantity: 1 }] };
    expect(await trpcCode(caller(userId).orders.create(unknown))).toBe("BAD_REQUEST");
    const records = await t.sql`
      SELECT status, response_body FROM idempotency_record WHERE user_id = ${userId} ORDER BY id`;
    expect(records.map((r) => [r.status, r.response_body.code])).toEqual([
      ["FAILED", "OUT_OF_STOCK"],
      ["FAILED", "SKU_NOT_FOUND"],
    ]);
    expect((await counts(userId))?.orders).toBe(0);
  });

  it("places an order for any shopper id the record's text column holds, not only a UUID", async () => {
    const userId = `shopper-${randomUUID().slice(0, 8)}`;
    const placed = await caller(userId).orders.create({ requestId: randomUUID(), items: mug(1) });
    expect(placed.status).toBe("PENDING_PAYMENT");
    expect((await counts(userId))?.items).toBe(1);
  });

  it("checks every line as it places the order: the first line's reason, in SKU order, and one currency", async () => {
    const userId = shopper();
    await t.sql`
      INSERT INTO sku (id, name, price_cents, currency, stock, initial_stock)
      VALUES ('SKU-EURO-CUP', 'Euro cup', 900, 'EUR', 5, 5) ON CONFLICT DO NOTHING`;
    const refusal = async (items: { skuId: string; quantity: number }[]) => {
      type Refused = { cause?: { code?: string; details?: { meta?: unknown } } };
      const error: Refused = await caller(userId)
        .orders.create({ requestId: randomUUID(), items })
        .then(
          () => ({}),
          (e: Refused) => e,
        );
      return { code: error.cause?.code, meta: error.cause?.details?.meta };
    };
    // Lines go in SKU order: SKU-LIMITED (short) comes before SKU-NOPE (unknown), SKU-AAA (unknown) before it.
    expect(
      await refusal([
        { skuId: "SKU-NOPE", quantity: 1 },
        { skuId: "SKU-LIMITED", quantity: 4 },
      ]),
    ).toEqual({
      code: "OUT_OF_STOCK",
      meta: { skuId: "SKU-LIMITED", available: 3, requested: 4 },
    });
    expect(
      await refusal([
        { skuId: "SKU-LIMITED", quantity: 4 },
        { skuId: "SKU-AAA", quantity: 1 },
      ]),
    ).toEqual({
      code: "SKU_NOT_FOUND",
      meta: { skuId: "SKU-AAA" },
    });
    expect((await refusal([{ skuId: "SKU-EURO-CUP", quantity: 1 }, ...mug(1)])).code).toBe("INVALID_INPUT");
    expect((await counts(userId))?.orders).toBe(0);
    expect((await counts(userId))?.items).toBe(0);

    const placed = await caller(userId).orders.create({
      requestId: randomUUID(),
      items: [...mug(2), { skuId: "SKU-GRINDER", quantity: 1 }],
    });
    expect(placed).toMatchObject({
      amountCents: 2 * 1250 + 8900,
      currency: "USD",
      status: "PENDING_PAYMENT",
    });
    const lines = await t.sql`
      SELECT sku_id, sku_name, quantity, unit_price_cents, line_total_cents::int AS total
        FROM order_item WHERE user_id = ${userId} AND order_id = ${placed.orderId} ORDER BY sku_id`;
    expect(lines.map((l) => [l.sku_id, l.sku_name, l.quantity, l.unit_price_cents, l.total])).toEqual([
      ["SKU-GRINDER", "Hand grinder", 1, 8900, 8900],
      ["SKU-MUG", "Enamel mug", 2, 1250, 2500],
    ]);
  });

  it.each([
    ["quantity 0", { requestId: "valid-key-0001", items: mug(0) }],
    ["negative quantity", { requestId: "valid-key-0002", items: mug(-1) }],
    ["absurd quantity", { requestId: "valid-key-0003", items: mug(1_000_000) }],
    ["fractional quantity", { requestId: "valid-key-0004", items: mug(1.5) }],
    ["no items", { requestId: "valid-key-0005", items: [] }],
    ["malformed key", { requestId: "short", items: mug(1) }],
    ["key with spaces", { requestId: "has spaces in it", items: mug(1) }],
    [
      "malformed SKU id",
      { requestId: "valid-key-0006", items: [{ skuId: "'; DROP TABLE sku;--", quantity: 1 }] },
    ],
    [
      "merged lines over the limit",
      {
        requestId: "valid-key-0007",
        items: [
          { skuId: "SKU-MUG", quantity: 60 },
          { skuId: "SKU-MUG", quantity: 60 },
        ],
      },
    ],
  ])("refuses bad input (%s) with BAD_REQUEST and writes nothing", async (_name, input) => {
    const userId = shopper();
    expect(await trpcCode(caller(userId).orders.create(input as never))).toBe("BAD_REQUEST");
    expect(await counts(userId)).toEqual({ orders: 0, items: 0, records: 0 });
  });

  it("keeps keys and orders private to their shopper", async () => {
    const alice = shopper();
    const bob = shopper();
    const input = { requestId: randomUUID(), items: mug(1) };
    const alicesOrder = await caller(alice).orders.create(input);
    // Bob guessing Alice's key gets his own order, never a replay of hers.
    const bobsOrder = await caller(bob).orders.create(input);
    expect(bobsOrder.replayed).toBe(false);
    expect(bobsOrder.orderId).not.toBe(alicesOrder.orderId);
    expect(await trpcCode(caller(bob).orders.get({ orderId: alicesOrder.orderId }))).toBe("NOT_FOUND");
    expect((await caller(bob).orders.list()).map((o) => o.orderId)).toEqual([bobsOrder.orderId]);
    const mine = await caller(alice).orders.get({ orderId: alicesOrder.orderId });
    expect(mine.items).toEqual([
      { skuId: "SKU-MUG", name: "Enamel mug", quantity: 1, unitPriceCents: 1250, lineTotalCents: 1250 },
    ]);
  });

  it("still answers with the one order after the key's record expired and was cleaned up", async () => {
    const userId = shopper();
    const input = { requestId: randomUUID(), items: mug(2) };
    const shortLived = { ...app.idempotency, ttlMs: 20 };
    const first = await createOrder(t.db, userId, input, { idempotency: shortLived });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await deleteExpiredRecords(t.db);
    const again = await createOrder(t.db, userId, input, { idempotency: shortLived });
    expect(again.orderId).toBe(first.orderId);
    expect((await counts(userId))?.orders).toBe(1);
    // A different cart under the old request id is still refused by the business key.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(
      createOrder(t.db, userId, { ...input, items: mug(5) }, { idempotency: shortLived }),
    ).rejects.toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    expect((await counts(userId))?.orders).toBe(1);
  });

  it('keeps on the order the fingerprint its idempotency record holds: one meaning of "the same request"', async () => {
    const userId = shopper();
    const requestId = randomUUID();
    // Lines split and out of SKU order: the fingerprint is of the canonical request, on both rows.
    const items = [
      { skuId: "SKU-MUG", quantity: 1 },
      { skuId: "SKU-KETTLE", quantity: 1 },
      { skuId: "SKU-MUG", quantity: 1 },
    ];
    await createOrder(t.db, userId, { requestId, items });
    const [row] = await t.sql<{ order: string; record: string }[]>`
      SELECT o.request_fingerprint AS order, r.fingerprint AS record
        FROM orders o JOIN idempotency_record r ON r.user_id = o.user_id AND r.idempotency_key = o.request_id
       WHERE o.user_id = ${userId} AND o.request_id = ${requestId}`;
    expect(row?.order).toMatch(/^[0-9a-f]{64}$/);
    expect(row?.order).toBe(row?.record);
    // And it is the fingerprint of the order's canonical request, as insertOrder computes it on its own.
    expect(row?.order).toBe(
      fingerprint("order.create", {
        items: [
          { skuId: "SKU-KETTLE", quantity: 1 },
          { skuId: "SKU-MUG", quantity: 2 },
        ],
      }),
    );
  });
  it("answers a retryable 503, and writes nothing, when the server it reaches has become a read-only standby", async () => {
    // A failover or a switchover demotes the primary: until the load balancer's health check sees it, a
    // connection can still land on it, and every write fails with 25006 (read_only_sql_transaction).
    const userId = shopper();
    const input = { requestId: randomUUID(), items: mug(1) };
    const demoted = createDb(t.url, { max: 1 });
    try {
      await demoted.$client`SET default_transaction_read_only = on`;
      await expect(
        createOrder(demoted, userId, input, { idempotency: app.idempotency }),
      ).rejects.toMatchObject({
        code: "SERVICE_UNAVAILABLE",
        details: { retryable: true },
      });
      expect(await counts(userId)).toEqual({ orders: 0, items: 0, records: 0 });
      // The retry reaches the new primary and makes the one order.
      const retried = await createOrder(t.db, userId, input, { idempotency: app.idempotency });
      expect(retried.replayed).toBe(false);
      expect(await counts(userId)).toEqual({ orders: 1, items: 1, records: 1 });
    } finally {
      await closeDb(demoted);
    }
  });

  it("leaves the key retryable after a transient database failure; the retry makes one order", async () => {
    const userId = shopper();
    const input = { requestId: randomUUID(), items: mug(1) };
    const impatient = createDb(t.url, { max: 2, statementTimeoutMs: 300 });
    const blocker = pgClient(t.url, { max: 1, onnotice: () => {} });
    try {
      // Another session holds the orders table: the order insert times out, a real transient failure.
      await blocker.begin(async (tx) => {
        await tx`LOCK TABLE orders IN ACCESS EXCLUSIVE MODE`;
        await expect(
          createOrder(impatient, userId, input, { idempotency: app.idempotency }),
        ).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE", details: { retryable: true } });
      });
      expect(await counts(userId)).toEqual({ orders: 0, items: 0, records: 0 });
      const retried = await createOrder(impatient, userId, input, { idempotency: app.idempotency });
      expect(retried.replayed).toBe(false);
      const again = await createOrder(impatient, userId, input, { idempotency: app.idempotency });
      expect(again).toEqual({ ...retried, replayed: true });
      expect(await counts(userId)).toEqual({ orders: 1, items: 1, records: 1 });
    } finally {
      await closeDb(impatient);
      await blocker.end();
    }
  });

  it("lets a shopper place a second, different order with a new key", async () => {
    const userId = shopper();
    const a = await caller(userId).orders.create({ requestId: randomUUID(), items: mug(1) });
    const b = await caller(userId).orders.create({ requestId: randomUUID(), items: mug(1) });
    expect(a.orderId).not.toBe(b.orderId);
    expect((await counts(userId))?.orders).toBe(2);
  });
});
