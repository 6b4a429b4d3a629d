import { randomUUID } from "node:crypto";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { operationsOverview, retryJob } from "~/server/admin/overview";
import type { AppContext } from "~/server/app-context";
import { type Consumer, consumeOnce } from "~/server/fulfilment/consume";
import { stockConsumer } from "~/server/fulfilment/consumers";
import { relayOutbox } from "~/server/fulfilment/relay";
import { handleConsumeJob, startWorker } from "~/server/fulfilment/worker";
import { reconcile } from "~/server/reconciliation/reconcile";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";
import { placePaidOrder } from "./support/scenarios";

let t: TestDatabase;
let app: AppContext;

// The database and the app's dependencies come from the file's fixtures (test/support/fixtures.ts).
test.beforeAll(({ database, app: wired }) => {
  t = database;
  app = wired;
});

async function eventOf(orderId: string, eventType: string) {
  const [event] = await t.sql<{ id: string }[]>`
    SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = ${eventType}`;
  if (!event) throw new Error(`no ${eventType} for ${orderId}`);
  return event.id;
}

async function effects(orderId: string) {
  const [row] = await t.sql<
    {
      status: string;
      deductions: number;
      deducted: number;
      grants: number;
      shipments: number;
      consumed: number;
    }[]
  >`
    SELECT (SELECT status FROM orders WHERE id = ${orderId}) AS status,
           (SELECT count(*)::int FROM stock_deduct_record WHERE order_id = ${orderId}) AS deductions,
           (SELECT coalesce(sum(quantity), 0)::int FROM stock_deduct_record WHERE order_id = ${orderId}) AS deducted,
           (SELECT count(*)::int FROM benefit_grant WHERE order_id = ${orderId}) AS grants,
           (SELECT count(*)::int FROM shipment WHERE order_id = ${orderId}) AS shipments,
           (SELECT count(*)::int FROM message_consume_record c JOIN outbox_event e ON e.id = c.event_id
             WHERE e.aggregate_id = ${orderId}::text) AS consumed`;
  return row;
}

async function stockOf(skuId: string): Promise<number> {
  const [row] = await t.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`;
  return row?.stock ?? -1;
}

describe("idempotent consumers", () => {
  it("has each effect once when OrderPaid arrives 10 times at once and again later", async () => {
    const before = { mug: await stockOf("SKU-MUG"), beans: await stockOf("SKU-ESPRESSO") };
    const { orderId } = await placePaidOrder(app, [
      { skuId: "SKU-MUG", quantity: 2 },
      { skuId: "SKU-ESPRESSO", quantity: 1 },
    ]);
    const paid = await eventOf(orderId, "OrderPaid");
    const storm = (eventId: string, consumer: string) =>
      Promise.all(Array.from({ length: 10 }, () => handleConsumeJob(t.db, { eventId, consumer })));

    const [stock, benefits] = await Promise.all([storm(paid, "stock"), storm(paid, "benefits")]);
    expect(stock.filter((o) => o === "APPLIED")).toHaveLength(1);
    expect(benefits.filter((o) => o === "APPLIED")).toHaveLength(1);
    const deducted = await eventOf(orderId, "StockDeducted");
    const shipping = await storm(deducted, "shipping");
    expect(shipping.filter((o) => o === "APPLIED")).toHaveLength(1);

    // Redelivered much later: every consumer recognises the event.
    for (const [eventId, consumer] of [
      [paid, "stock"],
      [paid, "benefits"],
      [deducted, "shipping"],
    ] as const) {
      expect(await handleConsumeJob(t.db, { eventId, consumer })).toBe("DUPLICATE");
    }
    expect(await effects(orderId)).toEqual({
      status: "SHIPPED",
      deductions: 2,
      deducted: 3,
      grants: 2,
      shipments: 1,
      consumed: 3,
    });
    expect(await stockOf("SKU-MUG")).toBe(before.mug - 2);
    expect(await stockOf("SKU-ESPRESSO")).toBe(before.beans - 1);
  });

  it("does not repeat the effect when the consumer dies after commit, before acknowledging", async () => {
    const before = await stockOf("SKU-MUG");
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const job = { eventId: await eventOf(orderId, "OrderPaid"), consumer: "stock" };
    const crash = {
      afterCommit: () => {
        throw new Error("worker killed before ack");
      },
    };
    await expect(handleConsumeJob(t.db, job, crash)).rejects.toThrow("worker killed before ack");
    expect(await handleConsumeJob(t.db, job)).toBe("DUPLICATE");
    expect(await stockOf("SKU-MUG")).toBe(before - 1);
    expect((await effects(orderId))?.deductions).toBe(1);
  });

  it("has one effect when a consumer fails twice and then succeeds", async () => {
    const before = await stockOf("SKU-GRINDER");
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-GRINDER", quantity: 1 }]);
    const [event] =
      await t.sql`SELECT * FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = 'OrderPaid'`;
    let calls = 0;
    const flaky: Consumer = {
      ...stockConsumer,
      async apply(tx, e) {
        calls++;
        const result = await stockConsumer.apply(tx, e);
        if (calls <= 2) throw new Error(`transient failure ${calls}`);
        return result;
      },
    };
    const outboxRow = {
      id: event?.id,
      userId: event?.user_id,
      eventType: event?.event_type,
      aggregateType: event?.aggregate_type,
      aggregateId: event?.aggregate_id,
      dedupeKey: event?.dedupe_key,
      payload: event?.payload,
      createdAt: event?.created_at,
      publishedAt: event?.published_at,
    };
    await expect(consumeOnce(t.db, outboxRow, flaky)).rejects.toThrow("transient failure 1");
    await expect(consumeOnce(t.db, outboxRow, flaky)).rejects.toThrow("transient failure 2");
    expect(await consumeOnce(t.db, outboxRow, flaky)).toBe("APPLIED");
    expect(await stockOf("SKU-GRINDER")).toBe(before - 1);
    expect((await effects(orderId))?.deductions).toBe(1);
  });

  it("never oversells: when two paid orders race for the last units, one is marked short", async () => {
    await t.sql`UPDATE sku SET stock = 3, initial_stock = 3 WHERE id = 'SKU-LIMITED'`;
    const first = await placePaidOrder(app, [{ skuId: "SKU-LIMITED", quantity: 2 }]);
    const second = await placePaidOrder(app, [{ skuId: "SKU-LIMITED", quantity: 2 }]);
    const outcomes = await Promise.all(
      [first, second].flatMap(({ orderId }) =>
        Array.from({ length: 5 }, async () =>
          handleConsumeJob(t.db, { eventId: await eventOf(orderId, "OrderPaid"), consumer: "stock" }),
        ),
      ),
    );
    expect(outcomes.filter((o) => o === "APPLIED")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "SKIPPED")).toHaveLength(1);
    expect(await stockOf("SKU-LIMITED")).toBe(1);
    const statuses = [(await effects(first.orderId))?.status, (await effects(second.orderId))?.status].sort();
    expect(statuses).toEqual(["PAID", "STOCK_SHORT"]);
    const [short] = await t.sql`SELECT count(*)::int AS n FROM outbox_event WHERE event_type = 'StockShort'`;
    expect(short?.n).toBe(1);
  });
});

describe("delivery through the queue (graphile-worker)", () => {
  it("relays OrderPaid into the queue and fulfils the order, retrying a consumer that crashed after commit", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-KETTLE", quantity: 1 }]);
    let crashes = 0;
    const seen: string[] = [];
    const worker = await startWorker(t.db, {
      connectionString: t.url,
      concurrency: 4,
      relayIntervalMs: 50,
      pollIntervalMs: 200,
      log: pino({ level: "silent" }),
      hooks: {
        afterCommit: (event, consumer, outcome) => {
          if (event.aggregateId !== orderId || consumer !== "stock") return;
          seen.push(outcome);
          if (consumer === "stock" && outcome === "APPLIED" && crashes++ === 0) {
            throw new Error("killed after commit, before ack");
          }
        },
      },
    });
    try {
      await expect
        .poll(async () => (await effects(orderId))?.status, { timeout: 20_000, interval: 200 })
        .toBe("SHIPPED");
      // The crashed stock job is retried by the queue (after its backoff) and finds the event consumed.
      const stockJob = `${await eventOf(orderId, "OrderPaid")}:stock`;
      const [failed] =
        await t.sql`SELECT attempts, last_error FROM graphile_worker.jobs WHERE key = ${stockJob}`;
      expect(failed).toMatchObject({
        attempts: 1,
        last_error: expect.stringContaining("killed after commit"),
      });
      await expect
        .poll(async () => (await t.sql`SELECT 1 FROM graphile_worker.jobs WHERE key = ${stockJob}`).length, {
          timeout: 20_000,
          interval: 250,
        })
        .toBe(0);
    } finally {
      await worker.stop();
    }
    expect(crashes).toBe(1);
    expect(seen).toEqual(["APPLIED", "DUPLICATE"]);
    expect(await effects(orderId)).toMatchObject({ deductions: 1, grants: 2, shipments: 1 });
    const [unpublished] = await t.sql`SELECT count(*)::int AS n FROM outbox_event WHERE published_at IS NULL`;
    expect(unpublished?.n).toBe(0);
    expect(await relayOutbox(t.db)).toBe(0);
  });
});

describe("dead letters", () => {
  it("keeps a job that ran out of attempts, shows it to operators, and lets them retry it", async () => {
    const key = `poison-${randomUUID()}`;
    // A message no consumer can ever handle: its event does not exist.
    await t.sql`SELECT graphile_worker.add_job('consume-event',
      json_build_object('eventId', ${randomUUID()}::text, 'consumer', 'stock'), max_attempts := 1, job_key := ${key})`;
    const worker = await startWorker(t.db, {
      connectionString: t.url,
      concurrency: 1,
      relayIntervalMs: 1000,
      pollIntervalMs: 100,
      log: pino({ level: "silent" }),
    });
    try {
      await expect
        .poll(async () => (await operationsOverview(t.db)).deadLetters.map((j) => j.key), { timeout: 10_000 })
        .toContain(key);
    } finally {
      await worker.stop();
    }
    const report = await reconcile(t.db);
    const delivered = report.invariants.find((i) => i.name === "events-delivered");
    expect(delivered?.violations.map((v) => v.message)).toContain(
      "consumer job dead-lettered (out of attempts)",
    );

    const dead = (await operationsOverview(t.db)).deadLetters.find((j) => j.key === key);
    expect(await retryJob(t.db, dead?.id ?? "")).toBe(true);
    const [job] = await t.sql`SELECT attempts FROM graphile_worker.jobs WHERE key = ${key}`;
    expect(job?.attempts).toBe(0);
    expect(await retryJob(t.db, "not-a-number")).toBe(false);
    // Operators give up on it for good: remove it so the books balance again.
    await t.sql`DELETE FROM graphile_worker._private_jobs WHERE key = ${key}`;
  });
});

describe("afterwards", () => {
  it("leaves the database reconciled", async () => {
    const report = await reconcile(t.db);
    expect(report.invariants.flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`))).toEqual([]);
  });
});
