import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import type { AppContext } from "~/server/app-context";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { reconcile } from "~/server/reconciliation/reconcile";
import { testAppContext } from "./support/app-context";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { placePaidOrder } from "./support/scenarios";

let t: TestDatabase;
let app: AppContext;

beforeAll(async () => {
  t = await createTestDatabase();
  app = testAppContext(t.db);
});
afterAll(() => t.drop());

async function fulfil(orderId: string) {
  const [paid] =
    await t.sql`SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = 'OrderPaid'`;
  await handleConsumeJob(t.db, { eventId: paid?.id, consumer: "stock" });
  await handleConsumeJob(t.db, { eventId: paid?.id, consumer: "benefits" });
  const [deducted] = await t.sql`
    SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = 'StockDeducted'`;
  await handleConsumeJob(t.db, { eventId: deducted?.id, consumer: "shipping" });
}

const broken = async () =>
  (await reconcile(t.db)).invariants.flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`));

describe("reconciliation", () => {
  it("is clean after orders are paid and fulfilled", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 2 }]);
    await fulfil(orderId);
    const report = await reconcile(t.db);
    expect(report.invariants.length).toBeGreaterThanOrEqual(9);
    expect(await broken()).toEqual([]);
    expect(report.ok).toBe(true);
  });

  it("reports a second deduction inserted by hand, with the rows involved", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-ESPRESSO", quantity: 1 }]);
    await fulfil(orderId);
    await t.sql`INSERT INTO stock_deduct_record (user_id, order_id, sku_id, quantity)
                SELECT user_id, id, 'SKU-GRINDER', 1 FROM orders WHERE id = ${orderId}`;
    await t.sql`UPDATE sku SET stock = stock - 1 WHERE id = 'SKU-GRINDER'`;
    const report = await reconcile(t.db);
    expect(report.ok).toBe(false);
    const invariant = report.invariants.find((i) => i.name === "stock-deducted-once");
    expect(invariant?.violations[0]).toMatchObject({
      message: "deduction that matches no order line",
      rows: [{ order_id: orderId, sku_id: "SKU-GRINDER", quantity: 1 }],
    });
    await t.sql`DELETE FROM stock_deduct_record WHERE order_id = ${orderId} AND sku_id = 'SKU-GRINDER'`;
    await t.sql`UPDATE sku SET stock = stock + 1 WHERE id = 'SKU-GRINDER'`;
    expect(await broken()).toEqual([]);
  });

  it("reports an order whose successful refunds add up to its payment but is not REFUNDED", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
    await fulfil(orderId);
    // Two refunds that succeeded together, each summing without the other (the race notification-apply.ts locks out).
    await t.sql`
      INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, reason, status)
      SELECT o.user_id, 'R-' || n, gen_random_uuid()::text, p.order_id, p.id,
             CASE WHEN n = 1 THEN p.amount_cents / 2 ELSE p.amount_cents - p.amount_cents / 2 END,
             p.currency, 'test', 'REFUND_SUCCESS'
        FROM payment_order p JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id, generate_series(1, 2) AS n
       WHERE p.order_id = ${orderId} AND p.status = 'SUCCESS'`;
    // The ledger has no entry of those refunds either: they moved no money it knows of.
    expect(await broken()).toEqual([
      "refunds-within-paid: the successful refunds add up to the payment, but the order is not REFUNDED",
      "ledger-agrees: a payment's ledger balances differ from its payment and refunds",
    ]);
    await t.sql`DELETE FROM refund_order WHERE order_id = ${orderId}`;
    expect(await broken()).toEqual([]);
  });

  it("reports stock changed without a record, a lost deduction, and a stuck idempotency record", async () => {
    const { orderId } = await placePaidOrder(app, [{ skuId: "SKU-KETTLE", quantity: 1 }]);
    await fulfil(orderId);
    await t.sql`UPDATE sku SET stock = stock - 5 WHERE id = 'SKU-MUG'`;
    await t.sql`DELETE FROM shipment WHERE order_id = ${orderId}`;
    await t.sql`
      INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, locked_until, expires_at)
      VALUES (${randomUUID()}, 'order.create', 'stuck-key-1', 'x', 'PROCESSING', now() - interval '1 minute',
              now() + interval '1 day')`;
    // The report lists what happened once first, then goods, then money (reconcile.ts).
    expect(await broken()).toEqual([
      "shipped-once: consumed but not shipped",
      "no-stuck-idempotency-records: PROCESSING past its lease",
      "stock-balances: stock does not balance",
    ]);
  });

  it("names an order whose money is not the price of what it keeps, and the difference (conservation)", async () => {
    const { orderId, amountCents } = await placePaidOrder(app, [{ skuId: "SKU-MUG", quantity: 1 }]);
    await fulfil(orderId);
    // It ran short of stock and no refund went back: what a late payment once made the automatic refund do.
    await t.sql`UPDATE orders SET status = 'STOCK_SHORT' WHERE id = ${orderId}`;
    const report = await reconcile(t.db, { lagSeconds: 0 });
    const figures = await opsFigures(t.db, report);
    expect(figures.unconservedOrders).toBe(1);
    expect(alertsFrom(figures).map((alert) => alert.name)).toContain("money_not_conserved");
    expect(report.invariants.find((i) => i.name === "money-conserved")?.violations).toEqual([
      {
        message: "the money an order holds is not the price of what it keeps",
        rows: [
          expect.objectContaining({
            order_id: orderId,
            status: "STOCK_SHORT",
            holds: String(amountCents),
            keeps: "0",
            difference: String(amountCents),
          }),
        ],
      },
    ]);
    await t.sql`UPDATE orders SET status = 'SHIPPED' WHERE id = ${orderId}`;
    expect(
      (await reconcile(t.db, { lagSeconds: 0 })).invariants.find((i) => i.name === "money-conserved")
        ?.violations,
    ).toEqual([]);
  });

  it("names a payment whose ledger lost or changed a transfer, with both sides of the difference", async () => {
    const { orderId, amountCents, outTradeNo } = await placePaidOrder(app, [
      { skuId: "SKU-MUG", quantity: 2 },
    ]);
    await fulfil(orderId);
    const ledgerViolations = async () =>
      (await reconcile(t.db)).invariants.find((i) => i.name === "ledger-agrees")?.violations ?? [];
    // An amount altered.
    await t.sql`UPDATE ledger_transfer SET amount_cents = amount_cents - 1 WHERE order_id = ${orderId}`;
    expect(await ledgerViolations()).toEqual([
      {
        message: "a payment's ledger balances differ from its payment and refunds",
        rows: [
          expect.objectContaining({
            out_trade_no: outTradeNo,
            order_id: orderId,
            ledger_paid: String(amountCents - 1),
            paid: String(amountCents),
          }),
        ],
      },
    ]);
    await t.sql`UPDATE ledger_transfer SET amount_cents = amount_cents + 1 WHERE order_id = ${orderId}`;
    expect(await ledgerViolations()).toEqual([]);
    // The capture deleted.
    const [capture] = await t.sql<{ fact_key: string }[]>`
      DELETE FROM ledger_transfer WHERE order_id = ${orderId} RETURNING fact_key`;
    expect(await ledgerViolations()).toEqual([
      expect.objectContaining({
        rows: [
          expect.objectContaining({ out_trade_no: outTradeNo, ledger_paid: "0", paid: String(amountCents) }),
        ],
      }),
    ]);
    await t.sql`
      INSERT INTO ledger_transfer (user_id, order_id, payment_id, fact_key, from_account, to_account, amount_cents, currency)
      SELECT user_id, order_id, id, ${capture?.fact_key ?? ""}, 'shopper', 'revenue', amount_cents, currency
        FROM payment_order WHERE out_trade_no = ${outTradeNo}`;
    expect(await ledgerViolations()).toEqual([]);
  });
});
