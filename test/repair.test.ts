import { reconcileOncePerPeriod } from "~/server/reconciliation/reconcile";
import { repairRefundNo, repairWhatIsSafe } from "~/server/reconciliation/repair";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { submitPendingRefunds } from "~/server/refunds/submit";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import {
  consumeOrderEvents,
  deliverAll,
  factAbout,
  notifyAsProvider,
  orderAwaitingPayment,
  unitLeftBehindForRejectedRefund,
  violationsOf,
} from "./support/scenarios";

/** Money and goods that repair themselves (src/server/reconciliation/repair.ts), with nothing done by hand. */

/**
 * The end of the race a cancel once won against a payment's success (the success's statements as they were
 * before it locked the order): the payment took the money while the order awaited payment, the cancel closed
 * the order between that and the order's update, which then changed nothing.
 */
async function closedOrderThatKeptTheMoney(
  database: TestDatabase,
  outTradeNo: string,
  transactionId: string,
) {
  const success = await database.sql.reserve();
  const cancel = await database.sql.reserve();
  try {
    await success`BEGIN`;
    const [payment] = await success<
      { id: string; user_id: string; order_id: string; amount_cents: number }[]
    >`
      UPDATE payment_order p SET status = 'SUCCESS', transaction_id = ${transactionId}, paid_at = now(), updated_at = now()
       WHERE p.out_trade_no = ${outTradeNo} AND p.status = 'CLOSED'
         AND EXISTS (SELECT 1 FROM orders o WHERE o.id = p.order_id AND o.status = 'PENDING_PAYMENT')
      RETURNING p.id, p.user_id, p.order_id, p.amount_cents::int`;
    if (!payment) throw new Error("the payment did not move");
    // Here the cancel commits (npm run interleavings found this schedule with the order's lock removed).
    await cancel`BEGIN`;
    await cancel`SELECT id FROM orders WHERE id = ${payment.order_id} FOR UPDATE`;
    await cancel`UPDATE orders SET status = 'CLOSED', updated_at = now() WHERE id = ${payment.order_id}`;
    await cancel`COMMIT`;
    await success`
      INSERT INTO ledger_transfer (user_id, order_id, payment_id, fact_key, from_account, to_account, amount_cents, currency)
      VALUES (${payment.user_id}, ${payment.order_id}, ${payment.id}, ${`capture:${transactionId}`}, 'shopper', 'revenue',
              ${payment.amount_cents}, 'USD')`;
    const moved = await success`
      UPDATE orders SET status = 'PAID' WHERE id = ${payment.order_id} AND status = 'PENDING_PAYMENT' RETURNING id`;
    expect(moved).toHaveLength(0);
    await success`COMMIT`;
    return payment;
  } finally {
    success.release();
    cancel.release();
  }
}

describe("money an order that keeps nothing still holds", () => {
  test("a closed order whose payment took the money: refunded by the periodic run, once, and listed as repaired", async ({
    app,
    mockPay,
    database,
  }) => {
    const { orderId, payment, confirm } = await orderAwaitingPayment(app, mockPay);
    const paid = await confirm();
    await notifyAsProvider(app, { ...factAbout(app, payment), type: "payment.closed", transaction_id: null });
    const kept = await closedOrderThatKeptTheMoney(database, payment.outTradeNo, paid.transactionId ?? "");
    // Two minutes ago: past reconciliation's lag.
    await database.sql`UPDATE orders SET updated_at = updated_at - interval '2 minutes' WHERE id = ${orderId}`;
    await database.sql`
      UPDATE payment_order SET updated_at = updated_at - interval '2 minutes', paid_at = paid_at - interval '2 minutes'
       WHERE order_id = ${orderId}`;
    expect(await violationsOf(app.db, orderId, 60)).toContain(
      "money-conserved: the money an order holds is not the price of what it keeps",
    );

    // The worker's periodic run repairs before it checks; its copies at the same moment repair nothing more.
    const [report] = await Promise.all([
      reconcileOncePerPeriod(app.db, 5),
      ...Array.from({ length: 4 }, () => repairWhatIsSafe(app.db)),
    ]);
    const refundNo = repairRefundNo(kept.id);
    const [refunds] = await database.sql<{ n: number; amount: number }[]>`
      SELECT count(*)::int AS n, sum(amount_cents)::int AS amount FROM refund_order WHERE order_id = ${orderId}`;
    expect(refunds).toEqual({ n: 1, amount: payment.amountCents });
    const reported = report?.repairs ?? [];
    expect(reported).toEqual([
      { kind: "money", orderId, refundNo, amountCents: payment.amountCents, currency: "USD" },
    ]);
    const [keptReport] =
      await database.sql`SELECT repairs FROM reconciliation_report WHERE checked_at IS NOT NULL`;
    expect(keptReport?.repairs).toEqual(reported);
    // What it repaired does not alert: its refund is on its way.
    const alerting = (report?.invariants ?? [])
      .flatMap((i) => i.violations)
      .filter((v) => v.rows.some((row) => row.order_id === orderId));
    expect(alerting).toEqual([]);

    // The refund submitter sends it, MockPay refunds it: the order keeps nothing, and nothing is left to repair.
    await submitPendingRefunds(app.db, app.payments);
    await deliverAll(mockPay);
    const [after] = await database.sql`
      SELECT o.status AS order, p.status AS payment, r.refund_no, r.status AS refund
        FROM orders o JOIN refund_order r ON r.order_id = o.id JOIN payment_order p ON p.id = r.payment_id
       WHERE o.id = ${orderId}`;
    expect(after).toEqual({
      order: "CLOSED",
      payment: "PAID_LATE",
      refund_no: refundNo,
      refund: "REFUND_SUCCESS",
    });
    expect(await violationsOf(app.db, orderId)).toEqual([]);
    expect((await repairWhatIsSafe(app.db, { lagSeconds: 0 })).filter((r) => r.orderId === orderId)).toEqual(
      [],
    );
  });

  test("an order that is only just closed is left to its own flow until it has settled", async ({
    app,
    mockPay,
    database,
  }) => {
    const { orderId, payment, confirm } = await orderAwaitingPayment(app, mockPay);
    const paid = await confirm();
    await notifyAsProvider(app, { ...factAbout(app, payment), type: "payment.closed", transaction_id: null });
    await closedOrderThatKeptTheMoney(database, payment.outTradeNo, paid.transactionId ?? "");
    expect((await repairWhatIsSafe(app.db, { lagSeconds: 60 })).filter((r) => r.orderId === orderId)).toEqual(
      [],
    );
  });
});

describe("units left behind by a shipment for a line refund that was then rejected", () => {
  test("go back to stock under that refund; its Retry then pays without giving them back twice", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await unitLeftBehindForRejectedRefund(app, mockPay);
    const { skuId, refundNo } = paid;
    const stock = async () =>
      (await database.sql<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`)[0]?.stock;
    expect(await stock()).toBe(8);
    expect(await violationsOf(app.db, paid.orderId)).toContain(
      "goods-conserved: a shipped order's stock is not what it shipped less what came back",
    );

    const repairs = await Promise.all(
      Array.from({ length: 5 }, () => repairWhatIsSafe(app.db, { lagSeconds: 0 })),
    );
    expect(repairs.flat().filter((r) => r.orderId === paid.orderId)).toEqual([
      { kind: "stock", orderId: paid.orderId, refundNo, skuId, quantity: 1 },
    ]);
    expect(await stock()).toBe(9);
    expect(
      (await violationsOf(app.db, paid.orderId)).filter((v) => !v.startsWith("no-failed-refund-unnoticed")),
    ).toEqual([]);

    await retryFailedRefund(app.db, paid.providerRefundNo, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    const [after] = await database.sql`SELECT status FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(after?.status).toBe("REFUND_SUCCESS");
    expect(await stock()).toBe(9);
    expect(await violationsOf(app.db, paid.orderId)).toEqual([]);
  });
});
