import { randomUUID } from "node:crypto";
import type { ReconciliationReport } from "~/server/reconciliation/reconcile";
import {
  lastReconciliation,
  ordersToCheck,
  reconcile,
  reconcileWhenDue,
  requestReconciliation,
} from "~/server/reconciliation/reconcile";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { consumeOrderEvents, payThroughProvider } from "./support/scenarios";

/**
 * An incremental reconciliation checks only the orders touched since the last run (each table that moves money
 * or goods appends them to order_touch in a trigger), yet finds every violation a full run finds: each
 * invariant's break is planted by hand, in an old order no run has touched since it was checked, and in one
 * touched since; both runs then look.
 */

type Order = { userId: string; orderId: string; outTradeNo: string };
type Plant = {
  invariant: string;
  /** Applied to an old order and a recent one; `once` for what is not about an order. */
  plant?: (sql: TestDatabase["sql"], order: Order) => Promise<unknown>;
  once?: (sql: TestDatabase["sql"]) => Promise<unknown>;
};

const PLANTS: Plant[] = [
  {
    invariant: "one-order-per-request",
    // The unique index is what stops it in life (dropped below, before the plants).
    plant: (sql, o) => sql`
      INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, currency, status)
      SELECT user_id, request_id, request_fingerprint, amount_cents, currency, 'CLOSED' FROM orders WHERE id = ${o.orderId}`,
  },
  {
    invariant: "one-successful-payment",
    plant: (sql, o) =>
      sql`UPDATE payment_order SET amount_cents = amount_cents + 1 WHERE order_id = ${o.orderId}`,
  },
  {
    invariant: "stock-deducted-once",
    plant: (sql, o) => sql`
      INSERT INTO stock_deduct_record (user_id, order_id, sku_id, quantity) VALUES (${o.userId}, ${o.orderId}, 'SKU-GRINDER', 1)`,
  },
  {
    invariant: "benefits-granted-once",
    plant: (sql, o) =>
      sql`DELETE FROM benefit_grant WHERE order_id = ${o.orderId} AND benefit_type = 'LOYALTY_POINTS'`,
  },
  {
    invariant: "shipped-once",
    plant: async (sql, o) => {
      await sql`DELETE FROM shipment_line WHERE order_id = ${o.orderId}`;
      await sql`DELETE FROM shipment WHERE order_id = ${o.orderId}`;
    },
  },
  {
    invariant: "events-delivered",
    plant: (sql, o) => sql`
      UPDATE outbox_event SET published_at = NULL, created_at = now() - interval '1 hour'
       WHERE aggregate_id = ${o.orderId} AND event_type = 'OrderPaid'`,
  },
  {
    invariant: "coupons-used-once",
    plant: (sql, o) => sql`UPDATE orders SET discount_cents = 50 WHERE id = ${o.orderId}`,
  },
  {
    invariant: "unpaid-orders-close",
    plant: (sql, o) => sql`
      UPDATE orders SET status = 'PENDING_PAYMENT', created_at = now() - interval '2 days' WHERE id = ${o.orderId}`,
  },
  {
    invariant: "no-stuck-idempotency-records",
    once: (sql) => sql`
      INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, locked_until, expires_at)
      VALUES (${randomUUID()}, 'order.create', 'stuck', 'x', 'PROCESSING', now() - interval '1 minute', now() + interval '1 day')`,
  },
  {
    invariant: "stock-balances",
    once: (sql) => sql`UPDATE sku SET stock = stock - 1 WHERE id = 'SKU-MUG'`,
  },
  {
    invariant: "goods-conserved",
    plant: (sql, o) => sql`UPDATE shipment_line SET quantity = quantity + 1 WHERE order_id = ${o.orderId}`,
  },
  {
    invariant: "refunded-orders-net-zero",
    plant: (sql, o) => sql`UPDATE orders SET status = 'REFUNDED' WHERE id = ${o.orderId}`,
  },
  {
    invariant: "partial-refunds-give-back",
    plant: (sql, o) => sql`
      UPDATE benefit_grant SET amount = amount + 1 WHERE order_id = ${o.orderId} AND benefit_type = 'LOYALTY_POINTS'`,
  },
  {
    invariant: "refunds-within-paid",
    plant: (sql, o) => refundOf(sql, o, "amount_cents + 100", "REFUND_PROCESSING"),
  },
  {
    invariant: "money-conserved",
    plant: (sql, o) => sql`UPDATE orders SET amount_cents = amount_cents + 100 WHERE id = ${o.orderId}`,
  },
  {
    invariant: "ledger-agrees",
    plant: (sql, o) => sql`DELETE FROM ledger_transfer WHERE order_id = ${o.orderId}`,
  },
  {
    // The provider's records are another system's: it is found by their updated_at (MockPay sets it on every
    // change), not by a trigger of the merchant's.
    invariant: "ledger-agrees-with-provider",
    plant: (sql, o) => sql`
      UPDATE provider_trade SET amount_cents = amount_cents + 1, updated_at = now() WHERE out_trade_no = ${o.outTradeNo}`,
  },
  {
    invariant: "agrees-with-provider",
    plant: (sql, o) => sql`UPDATE payment_order SET status = 'CLOSED' WHERE order_id = ${o.orderId}`,
  },
  {
    invariant: "late-payments-refunded",
    plant: (sql, o) => sql`
      UPDATE payment_order SET status = 'PAID_LATE', paid_at = now() - interval '1 hour' WHERE order_id = ${o.orderId}`,
  },
  {
    invariant: "no-failed-refund-unnoticed",
    plant: (sql, o) => refundOf(sql, o, "1", "REFUND_FAILED"),
  },
];

function refundOf(sql: TestDatabase["sql"], o: Order, amount: string, status: string) {
  return sql`
    INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, reason, status)
    SELECT p.user_id, ${`R-${randomUUID()}`}, ${randomUUID()}, p.order_id, p.id, ${sql.unsafe(amount)}, p.currency, 'planted', ${status}
      FROM payment_order p WHERE p.order_id = ${o.orderId}`;
}

/** Each broken check of a report, with the orders its rows name ("" for a row that names none). */
function breaks(report: ReconciliationReport): Map<string, Set<string>> {
  return new Map(
    report.invariants.flatMap((i) =>
      i.violations.map((v) => [
        `${i.name}: ${v.message}`,
        new Set(v.rows.map((row) => (typeof row.order_id === "string" ? row.order_id : ""))),
      ]),
    ),
  );
}

const options = { lagSeconds: 0, sampleSize: 1000 };
const periods = { everyMin: 1_000_000, fullEveryMin: 1_000_000 };

describe("incremental reconciliation", () => {
  test("a violation in more orders than the report's sample is checked again in every one of them", async ({
    app,
    mockPay,
    database,
  }) => {
    const sql = database.sql;
    const orders: Order[] = [];
    for (let i = 0; i < 5; i++) {
      const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
      await consumeOrderEvents(app.db, paid.orderId);
      orders.push(paid);
    }
    const points = (change: number) => sql`
      UPDATE benefit_grant SET amount = amount + ${change}
       WHERE order_id IN ${sql(orders.map((o) => o.orderId))} AND benefit_type = 'LOYALTY_POINTS'`;
    await points(1);
    // All of it long ago, and no run kept yet.
    await sql`UPDATE order_touch SET at = at - interval '1 hour'`;
    await sql`UPDATE provider_trade SET updated_at = updated_at - interval '1 hour'`;
    await sql`DELETE FROM reconciliation_report`;
    const sampled = { ...options, sampleSize: 2 };
    const full = await reconcileWhenDue(app.db, periods, sampled);
    expect(full?.kind).toBe("full");
    const planted = orders.map((o) => o.orderId);
    const open = (report: ReconciliationReport | null) => new Set(report?.openOrders?.map((o) => o.orderId));
    for (const id of planted) expect(open(full).has(id)).toBe(true);
    // Two incremental runs later, nothing touched: all five are still checked, and still named.
    for (let run = 0; run < 2; run++) {
      await sql`UPDATE reconciliation_report SET slot = slot - 1 WHERE kind = 'incremental'`;
      const incremental = await reconcileWhenDue(app.db, periods, sampled);
      expect(incremental?.kind).toBe("incremental");
      for (const id of planted) expect(open(incremental).has(id)).toBe(true);
      const given = incremental?.invariants.find((i) => i.name === "partial-refunds-give-back");
      expect(given?.violations[0]?.rows).toHaveLength(2);
    }
    await points(-1);
    await sql`DELETE FROM reconciliation_report`;
    await sql`UPDATE order_touch SET at = at - interval '1 hour'`;
  });

  test("finds every break a full run finds, planted in old untouched orders and in recently touched ones, and keeps reporting it until it is gone", async ({
    app,
    mockPay,
    database,
  }) => {
    const sql = database.sql;
    const fulfilled = async (): Promise<Order> => {
      const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
      await consumeOrderEvents(app.db, paid.orderId);
      return paid;
    };
    const perOrder = PLANTS.filter((p) => p.plant);
    // Whatever moved so far moved an hour ago, here and at the provider.
    const aged = async () => {
      await sql`UPDATE order_touch SET at = at - interval '1 hour'`;
      await sql`UPDATE provider_trade SET updated_at = updated_at - interval '1 hour'`;
      await sql`UPDATE provider_refund SET updated_at = updated_at - interval '1 hour'`;
    };
    // Old orders: fulfilled, their touches an hour old, checked by a full run kept since. Some stay untouched.
    const inTurn = async (n: number) => {
      const orders: Order[] = [];
      for (let i = 0; i < n; i++) orders.push(await fulfilled());
      return orders;
    };
    const old = await inTurn(perOrder.length);
    const bystanders = await inTurn(5);
    await aged();
    // Relayed (no relay runs here; the consumers ran above).
    const relayed = () => sql`UPDATE outbox_event SET published_at = now() WHERE published_at IS NULL`;
    await relayed();
    const first = await reconcileWhenDue(app.db, periods, options);
    expect(first?.kind).toBe("full");
    expect(breaks(first as ReconciliationReport)).toEqual(new Map());

    // Recent orders, fulfilled after that run.
    const recent = await inTurn(perOrder.length);
    const kept = await lastReconciliation(app.db);
    const since = new Date((kept?.claimedAt.getTime() ?? 0) - 60_000);
    const before = new Set((await ordersToCheck(app.db, since)).map((o) => o.orderId));
    expect(before).toEqual(new Set(recent.map((o) => o.orderId)));

    await relayed();
    await sql`DROP INDEX orders_user_id_request_id_uq`;
    for (const [i, p] of perOrder.entries()) {
      await p.plant?.(sql, old[i] as Order);
      await p.plant?.(sql, recent[i] as Order);
    }
    for (const p of PLANTS) await p.once?.(sql);

    const incremental = await reconcileWhenDue(app.db, periods, options);
    expect(incremental?.kind).toBe("incremental");
    const full = await reconcile(app.db, options);

    // The full run finds every invariant planted (so this test can fail), in both orders where it names them.
    const found = breaks(full);
    for (const p of PLANTS)
      expect(
        [...found.keys()].some((key) => key.startsWith(`${p.invariant}: `)),
        p.invariant,
      ).toBe(true);
    // The incremental run finds the same breaks, naming the same orders, having checked fewer orders.
    expect(breaks(incremental as ReconciliationReport)).toEqual(found);
    const named = new Set([...found.values()].flatMap((orders) => [...orders]));
    for (const [i, p] of perOrder.entries()) {
      if (p.invariant === "unpaid-orders-close" || p.invariant === "events-delivered") continue;
      expect(named.has((old[i] as Order).orderId), p.invariant).toBe(true);
      expect(named.has((recent[i] as Order).orderId), p.invariant).toBe(true);
    }
    expect(incremental?.ordersChecked).toBeLessThan(old.length + recent.length + bystanders.length);
    for (const o of bystanders) expect(named.has(o.orderId)).toBe(false);

    // Nothing touched since: the next incremental run still reports every break (it checks the orders the
    // last report named)…
    await aged();
    await sql`UPDATE reconciliation_report SET slot = slot - 1 WHERE kind = 'incremental'`;
    const again = await reconcileWhenDue(app.db, periods, options);
    expect(again?.kind).toBe("incremental");
    expect(breaks(again as ReconciliationReport)).toEqual(found);

    // …until it is gone: the shipments put back, the next run no longer reports them.
    const shipped = perOrder.findIndex((p) => p.invariant === "goods-conserved");
    const both = [old[shipped], recent[shipped]] as Order[];
    await sql`UPDATE reconciliation_report SET slot = slot - 1 WHERE kind = 'incremental'`;
    await sql`UPDATE shipment_line SET quantity = quantity - 1 WHERE order_id IN ${sql(both.map((o) => o.orderId))}`;
    const cleared = await reconcileWhenDue(app.db, periods, options);
    expect(cleared?.kind).toBe("incremental");
    const left = breaks(cleared as ReconciliationReport);
    expect([...left.keys()]).toEqual([...found.keys()].filter((key) => !key.startsWith("goods-conserved: ")));
  });

  test("Reconcile now queues one full run, which the next worker to look takes", async ({
    app,
    database,
  }) => {
    await Promise.all(Array.from({ length: 5 }, () => requestReconciliation(app.db)));
    expect(await database.sql`SELECT count(*)::int AS n FROM reconciliation_request`).toEqual([{ n: 1 }]);
    const runs = await Promise.all(
      Array.from({ length: 4 }, () => reconcileWhenDue(app.db, periods, options)),
    );
    expect(runs.filter((run) => run?.kind === "requested")).toHaveLength(1);
    expect(await database.sql`SELECT count(*)::int AS n FROM reconciliation_request`).toEqual([{ n: 0 }]);
  });
});
