import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { reconcile } from "~/server/reconciliation/reconcile";
import { createRefundOperation } from "~/server/refunds/create-refund";
import { handleOperation } from "~/server/rest/rest-route";
import { signApiToken } from "~/server/session/session";
import { createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, payThroughProvider } from "./support/scenarios";

const callerFor = (app: AppContext, userId: string) => createCaller({ app, userId, requestId: randomUUID() });
const basket = [
  { skuId: "SKU-MUG", quantity: 3 },
  { skuId: "SKU-ESPRESSO", quantity: 1 },
];

async function consume(database: TestDatabase, orderId: string, type: string, consumers: string[]) {
  const events = await database.sql<{ id: string }[]>`
    SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = ${type} ORDER BY created_at`;
  for (const event of events) {
    // Every consumer twice: a redelivered job finds its work done.
    for (const consumer of [...consumers, ...consumers])
      await handleConsumeJob(database.db, { eventId: event.id, consumer });
  }
}

const fulfil = (database: TestDatabase, orderId: string) =>
  consume(database, orderId, "OrderPaid", ["stock", "benefits"]);
const settleRefunds = (database: TestDatabase, orderId: string) =>
  consume(database, orderId, "RefundSucceeded", ["stock-return", "benefit-reversal"]);

async function holdings(database: TestDatabase, orderId: string) {
  const [row] = await database.sql<{ mugs: number; espresso: number; points: number; status: string }[]>`
    SELECT (SELECT coalesce(sum(d.quantity), 0) - coalesce((SELECT sum(quantity) FROM stock_return_record
                                                           WHERE order_id = ${orderId} AND sku_id = 'SKU-MUG'), 0)
              FROM stock_deduct_record d WHERE d.order_id = ${orderId} AND d.sku_id = 'SKU-MUG')::int AS mugs,
           (SELECT coalesce(sum(d.quantity), 0) - coalesce((SELECT sum(quantity) FROM stock_return_record
                                                           WHERE order_id = ${orderId} AND sku_id = 'SKU-ESPRESSO'), 0)
              FROM stock_deduct_record d WHERE d.order_id = ${orderId} AND d.sku_id = 'SKU-ESPRESSO')::int AS espresso,
           ((SELECT coalesce(sum(amount), 0) FROM benefit_grant WHERE order_id = ${orderId} AND benefit_type = 'LOYALTY_POINTS')
            - (SELECT coalesce(sum(amount), 0) FROM benefit_reversal WHERE order_id = ${orderId} AND benefit_type = 'LOYALTY_POINTS'))::int AS points,
           (SELECT status FROM orders WHERE id = ${orderId}) AS status`;
  return row;
}

/** What reconciliation finds wrong with goods and money (events are consumed by hand here, never relayed). */
function broken(report: Awaited<ReturnType<typeof reconcile>>) {
  return report.invariants
    .filter((i) => i.name !== "events-delivered")
    .flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message} ${JSON.stringify(v.rows)}`));
}

async function stockOf(database: TestDatabase, skuId: string) {
  const [row] = await database.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`;
  return row?.stock ?? -1;
}

describe("refunds by line", () => {
  test("10 copies of a line refund at once: one refund priced from the line, its stock returned and points cut once", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, basket); // 3 × 1250 + 2490 = 6240
    await fulfil(database, paid.orderId);
    expect(await holdings(database, paid.orderId)).toMatchObject({ mugs: 3, espresso: 1, points: 62 });
    const mugsBefore = await stockOf(database, "SKU-MUG");
    const caller = callerFor(app, paid.userId);
    const refundNo = `R-${randomUUID()}`;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        caller.refunds.create({
          orderId: paid.orderId,
          refundNo,
          lines: [{ skuId: "SKU-MUG", quantity: 1 }],
        }),
      ),
    );
    const [first, ...others] = answers.map(({ replayed: _r, keyExpiresAt: _k, ...answer }) => answer);
    for (const other of others) expect(other).toEqual(first);
    expect(answers[0]).toMatchObject({ amountCents: 1250, lines: [{ skuId: "SKU-MUG", quantity: 1 }] });
    await deliverAll(mockPay);
    await settleRefunds(database, paid.orderId);
    // 4990 left paid: 49 points; two mugs and the espresso kept.
    expect(await holdings(database, paid.orderId)).toEqual({
      mugs: 2,
      espresso: 1,
      points: 49,
      status: "PAID",
    });
    expect(await stockOf(database, "SKU-MUG")).toBe(mugsBefore + 1);
    const [rows] = await database.sql`
      SELECT (SELECT count(*)::int FROM refund_order WHERE order_id = ${paid.orderId}) AS refunds,
             (SELECT count(*)::int FROM refund_line WHERE order_id = ${paid.orderId}) AS lines,
             (SELECT count(*)::int FROM stock_return_record WHERE order_id = ${paid.orderId}) AS returns`;
    expect(rows).toEqual({ refunds: 1, lines: 1, returns: 1 });
    // The same refund number with other lines is another refund: refused.
    await expect(
      caller.refunds.create({ orderId: paid.orderId, refundNo, lines: [{ skuId: "SKU-MUG", quantity: 2 }] }),
    ).rejects.toMatchObject({ cause: { code: "IDEMPOTENCY_KEY_REUSED" } });
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(broken(report)).toEqual([]);
  });

  test("two refunds racing for the last units: one gets them, the other is told how many are left", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, basket);
    await fulfil(database, paid.orderId);
    const caller = callerFor(app, paid.userId);
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        caller.refunds.create({
          orderId: paid.orderId,
          refundNo: `RACE-${paid.orderId}-${i % 2}`,
          lines: [{ skuId: "SKU-MUG", quantity: 2 }],
        }),
      ),
    );
    const accepted = new Set(results.flatMap((r) => (r.status === "fulfilled" ? [r.value.refundNo] : [])));
    expect(accepted.size).toBe(1);
    for (const r of results) {
      if (r.status === "rejected")
        expect(r.reason).toMatchObject({ cause: { code: "REFUND_LINES_INVALID" } });
    }
    await deliverAll(mockPay);
    await settleRefunds(database, paid.orderId);
    expect(await holdings(database, paid.orderId)).toMatchObject({ mugs: 1, espresso: 1 });
  });

  test("a line refund that completes while OrderPaid still waits: only the rest is deducted", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, basket);
    const caller = callerFor(app, paid.userId);
    await caller.refunds.create({
      orderId: paid.orderId,
      refundNo: `R-${randomUUID()}`,
      lines: [{ skuId: "SKU-ESPRESSO", quantity: 1 }],
    });
    await deliverAll(mockPay);
    await settleRefunds(database, paid.orderId); // nothing to give back yet
    await fulfil(database, paid.orderId);
    // 6240 − 2490 = 3750 paid: 37 points; no espresso taken.
    expect(await holdings(database, paid.orderId)).toEqual({
      mugs: 3,
      espresso: 0,
      points: 37,
      status: "PAID",
    });
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(broken(report)).toEqual([]);
  });

  test("a 99 % refund by amount keeps the goods, revokes the coupon the order earned (it keeps less than its value), and leaves the points of what was kept", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, basket);
    await fulfil(database, paid.orderId);
    await callerFor(app, paid.userId).refunds.create({
      orderId: paid.orderId,
      refundNo: `R-${randomUUID()}`,
      amountCents: Math.floor(paid.amountCents * 0.99),
    });
    await deliverAll(mockPay);
    await settleRefunds(database, paid.orderId);
    expect(await holdings(database, paid.orderId)).toEqual({
      mugs: 3,
      espresso: 1,
      points: 0,
      status: "PAID",
    });
    const [coupon] = await database.sql`
      SELECT count(*)::int AS revoked FROM benefit_reversal WHERE order_id = ${paid.orderId} AND benefit_type = 'COUPON'`;
    expect(coupon?.revoked).toBe(1);
    // The last cents: refunded in full, everything comes back (it never shipped).
    await callerFor(app, paid.userId).refunds.create({
      orderId: paid.orderId,
      refundNo: `R-${randomUUID()}`,
      amountCents: paid.amountCents - Math.floor(paid.amountCents * 0.99),
    });
    await deliverAll(mockPay);
    await settleRefunds(database, paid.orderId);
    expect(await holdings(database, paid.orderId)).toEqual({
      mugs: 0,
      espresso: 0,
      points: 0,
      status: "REFUNDED",
    });
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(broken(report)).toEqual([]);
  });

  test("refuses lines not in the order, more than is left, and a refund naming nothing, writing nothing", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, basket);
    const caller = callerFor(app, paid.userId);
    const refund = (input: Record<string, unknown>) =>
      caller.refunds.create({ orderId: paid.orderId, refundNo: `R-${randomUUID()}`, ...input });
    await expect(refund({ lines: [{ skuId: "SKU-KETTLE", quantity: 1 }] })).rejects.toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
      cause: { code: "REFUND_LINES_INVALID" },
    });
    await expect(refund({ lines: [{ skuId: "SKU-MUG", quantity: 4 }] })).rejects.toMatchObject({
      cause: { code: "REFUND_LINES_INVALID" },
    });
    await expect(refund({})).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(refund({ lines: [] })).rejects.toMatchObject({ code: "BAD_REQUEST" });
    const [row] =
      await database.sql`SELECT count(*)::int AS n FROM refund_order WHERE order_id = ${paid.orderId}`;
    expect(row?.n).toBe(0);
  });

  test("over REST: lines in the body, the Idempotency-Key as the refund number, bad lines a 422 problem", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, basket);
    const token = signApiToken(paid.userId, app.sessionSecret);
    const deps = { app, tokensEnabled: true, logError: () => {} };
    const post = (key: string, body: unknown) =>
      handleOperation(
        deps,
        createRefundOperation,
        new Request(`http://test/api/v1/orders/${paid.orderId}/refunds`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "idempotency-key": key,
            "content-type": "application/json",
          },
          body: JSON.stringify(body),
        }),
        { orderId: paid.orderId },
      );
    const key = `R-${randomUUID()}`;
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => post(key, { lines: [{ skuId: "SKU-ESPRESSO", quantity: 1 }] })),
    );
    const bodies = await Promise.all(answers.map((answer) => answer.text()));
    expect(answers.map((answer) => answer.status)).toEqual([201, 201, 201, 201, 201]);
    expect(new Set(bodies).size).toBe(1);
    expect(JSON.parse(bodies[0] ?? "{}")).toMatchObject({
      refundNo: key,
      amountCents: 2490,
      lines: [{ skuId: "SKU-ESPRESSO", quantity: 1 }],
    });
    const bad = await post(`R-${randomUUID()}`, { lines: [{ skuId: "SKU-ESPRESSO", quantity: 1 }] });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({ code: "REFUND_LINES_INVALID" });
    const empty = await post(`R-${randomUUID()}`, {});
    expect(empty.status).toBe(400);
    const [row] =
      await database.sql`SELECT count(*)::int AS n FROM refund_order WHERE order_id = ${paid.orderId}`;
    expect(row?.n).toBe(1);
  });
});
