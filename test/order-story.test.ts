import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { ABSORBERS } from "@exactly-once/idempotency";
import pino from "pino";
import { onTestFinished } from "vitest";
import { OPERATIONS } from "~/server/all-operations";
import type { AppContext } from "~/server/app-context";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { AttemptLog } from "~/server/observability/attempt-log";
import { CONSUMER_ABSORBERS, createTelemetry } from "~/server/observability/observer";
import { ReplayCache } from "~/server/operations";
import { createOrderOperation } from "~/server/orders/create-order";
import { orderStory, STORY_OPERATIONS } from "~/server/story/story";
import { createCaller } from "~/server/trpc/root";
import { describe, expect, test } from "./support/fixtures";
import { payThroughProvider } from "./support/scenarios";

/** The app as it runs: attempts recorded as data, a replay cache. */
function recording(
  app: AppContext,
  { cached = true }: { cached?: boolean } = {},
): AppContext & { attempts: AttemptLog } {
  const attempts = new AttemptLog(app.db, { flushMs: 60_000 });
  const telemetry = createTelemetry(pino({ level: "silent" }), attempts);
  return {
    ...app,
    attempts,
    telemetry,
    idempotency: {
      ...app.idempotency,
      ...(cached ? { cache: new ReplayCache() } : {}),
      observe: telemetry.observer.idempotency,
    },
  };
}

const lane = (story: Awaited<ReturnType<typeof orderStory>>, layer: string) => {
  const found = story?.lanes.find((l) => l.layer === layer);
  if (!found) throw new Error(`no ${layer} lane`);
  const count = (outcome?: string) =>
    found.marks
      .filter((m) => outcome === undefined || m.outcome === outcome)
      .reduce((sum, m) => sum + m.count, 0);
  return {
    ...found,
    count,
    effects: found.marks.filter((m) => m.effect).reduce((sum, m) => sum + m.count, 0),
  };
};

describe("the story of one order, from what the layers recorded", () => {
  test("finds an order's keys under every operation the app has, by the operations' own names", () => {
    expect(Object.values(STORY_OPERATIONS).sort()).toEqual(OPERATIONS.map((op) => op.name).sort());
    const text = readFileSync("src/server/story/story.ts", "utf8");
    expect(OPERATIONS.filter((op) => text.includes(`'${op.name}'`) || text.includes(`"${op.name}"`))).toEqual(
      [],
    );
  });

  for (const mode of [
    {
      name: "one transaction, replay cache",
      claim: "transaction",
      cached: true,
      waitedFor: ABSORBERS.flight,
      replayedBy: [ABSORBERS.cache, ABSORBERS.record],
    },
    {
      name: "one transaction, no cache (the database's clock tells who waited)",
      claim: "transaction",
      cached: false,
      waitedFor: ABSORBERS.claim,
      replayedBy: [ABSORBERS.record],
    },
    {
      name: "claimed with a lease, no cache",
      claim: "lease",
      cached: false,
      waitedFor: ABSORBERS.lease,
      replayedBy: [ABSORBERS.record],
    },
  ] as const) {
    test(`30 copies of one order request at once (${mode.name}): the client lane has 30, the record executed once and absorbed 29`, async ({
      app: plain,
      database,
    }) => {
      const app = recording(plain, mode);
      // The same operation, declared for this test with the claim under test (order.create takes the transaction's).
      const declared = createOrderOperation.claim;
      createOrderOperation.claim = mode.claim;
      onTestFinished(() => {
        createOrderOperation.claim = declared;
      });
      const userId = randomUUID();
      const requestId = randomUUID();
      // The first copy's order insert is held up for a moment, so the other 29 certainly arrive while it runs.
      const lock = await database.db.$client.reserve();
      await lock`BEGIN`;
      await lock`LOCK TABLE orders IN SHARE ROW EXCLUSIVE MODE`;
      const calls = Array.from({ length: 30 }, () =>
        createCaller({ app, userId, requestId: randomUUID() }).orders.create({
          requestId,
          items: [{ skuId: "SKU-MUG", quantity: 1 }],
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      await lock`COMMIT`;
      lock.release();
      const answers = await Promise.all(calls);
      const [first] = answers;
      expect(new Set(answers.map((a) => a.orderId)).size).toBe(1);
      await app.attempts.flush();

      const story = await orderStory(app.db, { userId, orderId: first?.orderId ?? "" });
      const service = lane(story, "service");
      expect(service.count()).toBe(30);
      expect(service.count("first")).toBe(1);
      expect(service.count("replayed") + service.count("waited")).toBe(29);
      // Copies that arrived while the first ran waited for it: at least some did, at once.
      expect(service.count("waited")).toBeGreaterThan(0);
      expect(service.effects).toBe(1);
      expect(lane(story, "client").count()).toBe(30);
      expect(story?.absorbed).toBe(29);
      // Each absorbed copy names what absorbed it: the copies that waited, what they waited on; the
      // replays, where their answer came from. Together they are the 29.
      for (const m of service.marks.filter((m) => !m.effect)) {
        if (m.outcome === "waited") expect(m.absorbedBy).toBe(mode.waitedFor);
        else expect(mode.replayedBy).toContain(m.absorbedBy);
      }
      expect(service.marks.find((m) => m.effect)?.absorbedBy).toBe("");
      expect(service.absorbers.reduce((sum, a) => sum + a.count, 0)).toBe(29);
      expect(service.absorbers.map((a) => a.by)).toContain(mode.waitedFor);
    });
  }

  test("a natural key's copies name the unique index or the conditional update that answered them", async ({
    app: plain,
  }) => {
    const app = recording(plain);
    const userId = randomUUID();
    const caller = createCaller({ app, userId, requestId: randomUUID() });
    const { orderId } = await caller.orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    await Promise.all([caller.payments.create({ orderId }), caller.payments.create({ orderId })]);
    await caller.payments.create({ orderId });
    await caller.orders.cancel({ orderId });
    await caller.orders.cancel({ orderId });
    await app.attempts.flush();

    const service = lane(await orderStory(app.db, { userId, orderId }), "service");
    const absorbers = Object.fromEntries(service.absorbers.map((a) => [a.by, a.count]));
    expect(absorbers).toMatchObject({
      "the unique index payment_order_open_per_order_uq (the order's open payment answered)": 2,
      "the conditional update PENDING_PAYMENT → CLOSED matched no row: the order is already CLOSED": 1,
    });
  });

  test("MockPay's duplicate notifications and a consumer's redelivery show on their lanes, each applied once", async ({
    app: plain,
    mockPay,
    database,
  }) => {
    const app = recording(plain);
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const [orderPaid] = await database.sql<{ id: string }[]>`
      SELECT id FROM outbox_event WHERE aggregate_id = ${paid.orderId} AND event_type = 'OrderPaid'`;
    // The queue hands the stock consumer the same event three times (at-least-once delivery).
    for (let i = 0; i < 3; i++) {
      const outcome = await handleConsumeJob(app.db, { eventId: orderPaid?.id ?? "", consumer: "stock" });
      app.telemetry.observer.consumed({
        userId: paid.userId,
        eventId: orderPaid?.id ?? "",
        eventType: "OrderPaid",
        consumer: "stock",
        outcome,
      });
    }
    await app.attempts.flush();

    const story = await orderStory(app.db, paid);
    // The same order named with another shopper is no order at all.
    expect(await orderStory(app.db, { userId: randomUUID(), orderId: paid.orderId })).toBeUndefined();
    const provider = lane(story, "provider");
    const [delivered] = await database.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM payment_notification WHERE out_trade_no = ${paid.outTradeNo}`;
    expect(provider.count()).toBe(delivered?.n);
    expect(provider.effects).toBe(1);
    expect(provider.count("DUPLICATE")).toBe((delivered?.n ?? 0) - 1);
    const consumer = lane(story, "consumer");
    expect(consumer.count()).toBe(3);
    expect(consumer.count("APPLIED")).toBe(1);
    expect(consumer.count("DUPLICATE")).toBe(2);
    // What absorbed them: MockPay's copies, the payment's conditional update (it had moved on); the queue's
    // redeliveries, the consume record.
    expect(provider.absorbers).toEqual([
      {
        by: "the conditional update PENDING → SUCCESS matched no row: the payment is already SUCCESS",
        count: (delivered?.n ?? 0) - 1,
      },
    ]);
    expect(consumer.absorbers).toEqual([{ by: CONSUMER_ABSORBERS.DUPLICATE, count: 2 }]);
  });

  test("the attempt log: a thousand copies in one second are one row counted a thousand; it stays bounded", async ({
    database,
  }) => {
    const log = new AttemptLog(database.db, { flushMs: 60_000, maxEntries: 3 });
    const key = randomUUID();
    const at = Date.now();
    for (let i = 0; i < 1000; i++) {
      log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "replayed" }, at);
    }
    for (const other of ["a", "b", "c", "d"]) {
      log.add(
        { layer: "service", scope: "s", subject: "order.create", key: `${key}-${other}`, outcome: "first" },
        at,
      );
    }
    expect(log.dropped).toBe(2);
    expect(await log.flush()).toBe(3);
    // The same second again in a later flush: appended as a row of its own, summed by readers.
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "replayed" }, at);
    await log.flush();
    const rows = await database.sql<{ count: number }[]>`
      SELECT count FROM duplicate_attempt WHERE key = ${key} ORDER BY count DESC`;
    expect(rows).toEqual([{ count: 1000 }, { count: 1 }]);
  });

  test("the attempt log: a flush whose prune fails does not write its counts again (one first stays one)", async ({
    database,
  }) => {
    // The prune after a written flush fails, as when the database's connections drop between the two statements.
    await database.sql.unsafe(`
      CREATE FUNCTION refuse_prune() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'connection dropped'; END $$;
      CREATE TRIGGER refuse_prune BEFORE DELETE ON duplicate_attempt FOR EACH STATEMENT EXECUTE FUNCTION refuse_prune();`);
    try {
      const log = new AttemptLog(database.db, { flushMs: 60_000 });
      const key = randomUUID();
      log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "first" });
      await log.flush().catch(() => undefined);
      await log.flush().catch(() => undefined);
      const rows = await database.sql<
        { count: number }[]
      >`SELECT count FROM duplicate_attempt WHERE key = ${key}`;
      expect(rows).toEqual([{ count: 1 }]);
    } finally {
      await database.sql.unsafe(
        "DROP TRIGGER refuse_prune ON duplicate_attempt; DROP FUNCTION refuse_prune();",
      );
    }
  });

  test("the attempt log: a flush whose answer was lost after it committed is sent again and written once", async ({
    database,
  }) => {
    // The statement runs and commits; its answer never arrives, as when the primary is killed right after the
    // commit. The log cannot tell that from a flush that never ran, so it sends the batch again.
    let lose = 1;
    const client = Object.assign(async (strings: TemplateStringsArray, ...values: unknown[]) => {
      const result = await database.sql(strings, ...(values as never[]));
      if (lose-- > 0)
        throw Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" });
      return result;
    }, database.sql);
    const log = new AttemptLog({ ...database.db, $client: client } as typeof database.db, {
      flushMs: 60_000,
    });
    const key = randomUUID();
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "first" });
    await expect(log.flush()).rejects.toThrow("CONNECTION_CLOSED");
    // Counted meanwhile: a batch of its own, written too.
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "replayed" });
    expect(await log.flush()).toBe(2);
    const rows = await database.sql<{ outcome: string; count: number }[]>`
      SELECT outcome, sum(count)::int AS count FROM duplicate_attempt WHERE key = ${key} GROUP BY outcome ORDER BY outcome`;
    expect(rows).toEqual([
      { outcome: "first", count: 1 },
      { outcome: "replayed", count: 1 },
    ]);
  });

  test("the attempt log: a batch refused as data is dropped and counted, and the batches behind it are written", async ({
    database,
  }) => {
    let refuse = 1;
    const client = Object.assign(async (strings: TemplateStringsArray, ...values: unknown[]) => {
      if (refuse-- > 0) throw Object.assign(new Error("invalid byte sequence"), { code: "22021" });
      return database.sql(strings, ...(values as never[]));
    }, database.sql);
    const log = new AttemptLog({ ...database.db, $client: client } as typeof database.db, {
      flushMs: 60_000,
    });
    const key = randomUUID();
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "first" });
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "replayed" });
    expect(await log.flush()).toBe(0);
    expect(log.dropped).toBe(2);
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "waited" });
    expect(await log.flush()).toBe(1);
    // A key is whatever a client sent: one with a NUL byte (which PostgreSQL's text cannot hold) is written too.
    log.add({
      layer: "gateway",
      scope: "s",
      subject: "order.create",
      key: `${key}\u0000`,
      outcome: "rejected",
    });
    expect(await log.flush()).toBe(1);
    const rows = await database.sql`
      SELECT outcome, key FROM duplicate_attempt WHERE key LIKE ${`${key}%`} ORDER BY outcome`;
    expect(rows.map((row) => row.outcome)).toEqual(["rejected", "waited"]);
    expect(rows[0]?.key).toBe(`${key}\uFFFD`);
  });

  test("the attempt log: a flush that failed is tried again on its own, without another attempt counted", async ({
    database,
  }) => {
    let fail = 1;
    const client = Object.assign(async (strings: TemplateStringsArray, ...values: unknown[]) => {
      if (fail-- > 0)
        throw Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" });
      return database.sql(strings, ...(values as never[]));
    }, database.sql);
    const log = new AttemptLog({ ...database.db, $client: client } as typeof database.db, { flushMs: 50 });
    const key = randomUUID();
    log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome: "first" });
    await expect
      .poll(async () => (await database.sql`SELECT count FROM duplicate_attempt WHERE key = ${key}`).length, {
        timeout: 5_000,
      })
      .toBe(1);
  });

  test("the attempt log: flushes asked for at once run one after another, and every batch is written", async ({
    database,
  }) => {
    const log = new AttemptLog(database.db, { flushMs: 60_000 });
    const key = randomUUID();
    const flushes: Promise<number>[] = [];
    for (const outcome of ["first", "replayed", "waited"]) {
      log.add({ layer: "service", scope: "s", subject: "order.create", key, outcome });
      flushes.push(log.flush());
    }
    const written = await Promise.all(flushes);
    expect(written.reduce((sum, n) => sum + n, 0)).toBe(3);
    const rows =
      await database.sql`SELECT outcome FROM duplicate_attempt WHERE key = ${key} ORDER BY outcome`;
    expect(rows.map((row) => row.outcome)).toEqual(["first", "replayed", "waited"]);
  });

  test("an order that does not exist has no story", async ({ app }) => {
    expect(await orderStory(app.db, { userId: randomUUID(), orderId: randomUUID() })).toBeUndefined();
  });

  test("a shopper asking for another shopper's story, or with a malformed id, gets a clear 4xx and nothing else", async ({
    app,
  }) => {
    const owner = randomUUID();
    const { orderId } = await createCaller({
      app,
      userId: owner,
      requestId: randomUUID(),
    }).orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const stranger = createCaller({ app, userId: randomUUID(), requestId: randomUUID() });
    await expect(stranger.orders.story({ orderId })).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(stranger.orders.story({ orderId: "not-a-uuid" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
    const mine = await createCaller({ app, userId: owner, requestId: randomUUID() }).orders.story({
      orderId,
    });
    expect(mine.orderId).toBe(orderId);
  });
});
