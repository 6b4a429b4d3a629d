import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliverDueNotifications } from "~/mockpay/server/delivery";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import { closeDb, createDb, type Db, pgClient } from "~/server/db/client";
import { consumersOf } from "~/server/fulfilment/consumers";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { closeTimedOutOrders } from "~/server/orders/timeout";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { payRequestSchema } from "~/shared/provider-contract";
import { testAppContext, testMockPay } from "./support/app-context";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { startLoopbackApp } from "./support/loopback-app";
import { SHOPPER_TABLES } from "./support/shopper-tables";

/**
 * Statements name the shopper (docs/scale-out.md, "Ready to shard"): every table a shopper owns is keyed
 * by (user_id, …), so a statement that names only an order or row id finds no index. With sequential
 * scans priced out of reach (enable_seqscan = off makes the planner take any index it can), a whole life
 * of orders — placed with a coupon, paid through MockPay, fulfilled, refunded by line and in full,
 * cancelled, timed out — must not scan a single one of those tables: a scan left means a statement that
 * would go to every shard, and on one server reads the whole table.
 */

let t: TestDatabase;
let db: Db;
/**
 * The test's own statements (arranging, counting): opened after enable_seqscan = off, and naming the shopper,
 * so they scan no shopper table either. Their statistics reach pg_stat_user_tables whenever the backend
 * flushes them (at most once a second, or when idle), so a scan of the test's own would be counted or not by
 * timing alone.
 */
let own: ReturnType<typeof pgClient>;
/** The app's connections go by this name, so the test can wait for them to end. */
const APP = "shard-lookups-app";
/** Every statement the app sent during the test, with its parameters, by its text and parameters. */
const sent = new Map<string, { query: string; parameters: unknown[] }>();

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 1 });
  const [{ name } = { name: "" }] = await t.sql<{ name: string }[]>`SELECT current_database() AS name`;
  await t.sql.unsafe(`ALTER DATABASE ${name} SET enable_seqscan = off`);
  // Connections opened from now on plan with it.
  own = pgClient(t.url, { max: 1, onnotice: () => {} });
  db = createDb(t.url, {
    max: 4,
    applicationName: APP,
    debug: (_connection, query, parameters) => {
      sent.set(JSON.stringify([query, parameters]), { query, parameters });
    },
  });
});
afterAll(async () => {
  await own.end();
  await t.drop();
});

/**
 * Sequential scans of each shopper table so far. A backend flushes its counts as it exits (just after it
 * leaves pg_stat_activity): so the app's backends are waited out, then the counts read until they settle.
 */
async function seqScans(): Promise<Record<string, number>> {
  let last = "";
  for (;;) {
    const counts = await readSeqScans();
    if (JSON.stringify(counts) === last) return counts;
    last = JSON.stringify(counts);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function readSeqScans(): Promise<Record<string, number>> {
  for (let waited = 0; ; waited += 50) {
    const [left] = await t.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database()
         AND application_name = ${APP}`;
    if (!left?.n) break;
    if (waited > 10_000) throw new Error(`${left.n} app connections did not end`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const rows = await t.sql<{ relname: string; seq_scan: string }[]>`
    SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname IN ${t.sql(SHOPPER_TABLES)}`;
  return Object.fromEntries(rows.map((r) => [r.relname, Number(r.seq_scan)]));
}

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Index Cond"?: string;
  Plans?: PlanNode[];
}

/**
 * What each statement the app sent would do, planned again with sequential scans priced out: a scan of a
 * shopper table, or a scan of a (user_id, …) index whose condition does not fix user_id (the whole index
 * read), is a statement that does not name its shopper. Indexes that do not lead with user_id (the global
 * keys, the sweepers' partial indexes) are fine to search without it.
 */
async function statementsWithoutTheShopper(): Promise<string[]> {
  const explainer = pgClient(t.url, { max: 1, onnotice: () => {} });
  try {
    const userLed = new Set(
      (
        await explainer<{ indexname: string }[]>`
          SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexdef LIKE '%USING btree (user_id%'`
      ).map((r) => r.indexname),
    );
    const mentions = new RegExp(`\\b(${SHOPPER_TABLES.join("|")})\\b`);
    const found = new Set<string>();
    for (const { query, parameters } of sent.values()) {
      if (!mentions.test(query) || /^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)/i.test(query)) continue;
      const [row] = await explainer.unsafe(`EXPLAIN (FORMAT JSON) ${query}`, parameters as never[]);
      const walk = (node: PlanNode) => {
        const index = node["Index Name"];
        if (node["Node Type"] === "Seq Scan" && SHOPPER_TABLES.includes(node["Relation Name"] ?? "")) {
          found.add(`scans ${node["Relation Name"]}: ${query.replace(/\s+/g, " ").slice(0, 200)}`);
        }
        if (index && userLed.has(index) && !(node["Index Cond"] ?? "").includes("user_id")) {
          found.add(`reads all of ${index}: ${query.replace(/\s+/g, " ").slice(0, 200)}`);
        }
        for (const child of node.Plans ?? []) walk(child);
      };
      const [plan] = (row?.["QUERY PLAN"] ?? []) as { Plan: PlanNode }[];
      if (plan) walk(plan.Plan);
    }
    return [...found];
  } finally {
    await explainer.end();
  }
}

describe("every statement of an order's life names its shopper", () => {
  it("scans no shopper table from placing an order to its refund, cancel and timeout", async () => {
    const before = await seqScans();
    const loop = await startLoopbackApp(testAppContext(db), testMockPay(db));
    const { app, mockPay } = loop;
    const userId = randomUUID();
    const caller = createCaller({ app, userId, requestId: randomUUID() });

    /** Runs every event's consumers, the way the relay's jobs name them (event and shopper), until none is new. */
    const consumeAll = async () => {
      for (const event of await own<{ id: string; user_id: string; event_type: string }[]>`
          SELECT id, user_id, event_type FROM outbox_event WHERE published_at IS NULL ORDER BY created_at`) {
        for (const consumer of consumersOf(event.event_type)) {
          await handleConsumeJob(db, { eventId: event.id, userId: event.user_id, consumer: consumer.name });
        }
        await own`UPDATE outbox_event SET published_at = now() WHERE user_id = ${event.user_id} AND id = ${event.id}`;
      }
    };
    const deliver = async () => {
      for (let round = 0; round < 10; round++) {
        if ((await deliverDueNotifications(mockPay.db, { ...mockPay.delivery, sendDuplicates: true })) === 0)
          return;
      }
    };
    const pay = async (orderId: string) => {
      const payment = await caller.payments.create({ orderId });
      const { sig, ...request } = payRequestSchema.parse(
        Object.fromEntries(new URL(payment.payUrl, "http://x").searchParams),
      );
      await openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
      await confirmTrade(mockPay.db, mockPay.appId, payment.outTradeNo);
      await deliver();
      await consumeAll();
    };

    // An order paid and fulfilled: it earns a coupon.
    const first = await caller.orders.create({
      requestId: randomUUID(),
      items: [
        { skuId: "SKU-MUG", quantity: 2 },
        { skuId: "SKU-KETTLE", quantity: 1 },
      ],
    });
    await pay(first.orderId);
    const [coupon] = await caller.coupons.list();
    expect(coupon?.state).toBe("AVAILABLE");
    // A second order spends it, is paid, and is refunded one line, then the rest.
    const second = await caller.orders.create({
      requestId: randomUUID(),
      items: [
        { skuId: "SKU-GRINDER", quantity: 1 },
        { skuId: "SKU-MUG", quantity: 1 },
      ],
      couponCode: coupon?.code,
    });
    await pay(second.orderId);
    await caller.orders.get({ orderId: second.orderId });
    await caller.payments.timeline({ orderId: second.orderId });
    await caller.orders.story({ orderId: second.orderId });
    const line = await caller.refunds.create({
      orderId: second.orderId,
      refundNo: randomUUID(),
      lines: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    expect(line.status).not.toBe("REFUND_FAILED");
    await submitPendingRefunds(db, app.payments);
    await deliver();
    await consumeAll();
    const refunds = await caller.refunds.list({ orderId: second.orderId });
    const left = second.amountCents - refunds.reduce((sum, r) => sum + r.amountCents, 0);
    await caller.refunds.create({ orderId: second.orderId, refundNo: randomUUID(), amountCents: left });
    await submitPendingRefunds(db, app.payments);
    await deliver();
    await consumeAll();
    // The first order refunded in full: its coupon (spent) stays with the second; points go back.
    await caller.refunds.create({
      orderId: first.orderId,
      refundNo: randomUUID(),
      amountCents: first.amountCents,
    });
    await submitPendingRefunds(db, app.payments);
    await deliver();
    await consumeAll();
    // An order cancelled with its payment open, and one left unpaid until the timeout closes it.
    const cancelled = await caller.orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    await caller.payments.create({ orderId: cancelled.orderId });
    expect((await caller.orders.cancel({ orderId: cancelled.orderId })).status).toBe("CLOSED");
    const abandoned = await caller.orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    await own`UPDATE orders SET created_at = now() - interval '2 hours'
               WHERE user_id = ${userId} AND id = ${abandoned.orderId}`;
    expect((await closeTimedOutOrders(db, app)).closed).toEqual([abandoned.orderId]);

    const statuses = await own<
      { id: string; status: string }[]
    >`SELECT id, status FROM orders WHERE user_id = ${userId}`;
    expect(Object.fromEntries(statuses.map((o) => [o.id, o.status]))).toEqual({
      [first.orderId]: "REFUNDED",
      [second.orderId]: "REFUNDED",
      [cancelled.orderId]: "CLOSED",
      [abandoned.orderId]: "CLOSED",
    });
    await loop.close();
    await closeDb(db);
    const after = await seqScans();
    const scanned = Object.fromEntries(
      SHOPPER_TABLES.map((table) => [table, (after[table] ?? 0) - (before[table] ?? 0)]).filter(
        ([, n]) => n !== 0,
      ),
    );
    expect(scanned).toEqual({});
    expect(sent.size).toBeGreaterThan(50);
    expect(await statementsWithoutTheShopper()).toEqual([]);
  });
});
