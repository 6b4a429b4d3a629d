import { randomUUID } from "node:crypto";
import type { MockPayContext } from "~/mockpay/server/context";
import type { AppContext } from "~/server/app-context";
import { reconcileWhenDue } from "~/server/reconciliation/reconcile";
import { repairRefundNo, repairWhatIsSafe } from "~/server/reconciliation/repair";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { receiveReturn } from "~/server/refunds/returns";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import {
  consumeOrderEvents,
  deliverAll,
  factAbout,
  mockPayFault,
  notifyAsProvider,
  orderAwaitingPayment,
  payThroughProvider,
  scarceSku,
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
  test("a closed order whose payment took the money: refunded once, by the periodic run or a copy at the same moment, and listed as repaired by whichever made it", async ({
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

    // The worker's periodic run repairs before it checks; with copies at the same moment, one of them repairs
    // (whichever reaches the order first) and the others repair nothing more.
    const [report, ...copies] = await Promise.all([
      reconcileWhenDue(app.db, { everyMin: 5, fullEveryMin: 5 }),
      ...Array.from({ length: 4 }, () => repairWhatIsSafe(app.db)),
    ]);
    const refundNo = repairRefundNo(kept.id);
    const [refunds] = await database.sql<{ n: number; amount: number }[]>`
      SELECT count(*)::int AS n, sum(amount_cents)::int AS amount FROM refund_order WHERE order_id = ${orderId}`;
    expect(refunds).toEqual({ n: 1, amount: payment.amountCents });
    const reported = report?.repairs ?? [];
    expect([...reported, ...copies.flat()]).toEqual([
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
      { kind: "stock", orderId: paid.orderId, skuId, quantity: 1 },
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

describe("the goods repair and the refunds that pay for the same units", () => {
  /** A paid order of 2 units of its own SKU, and a caller for its shopper. */
  async function twoUnits(app: AppContext, mockPay: MockPayContext) {
    const skuId = await scarceSku(app.db, 10);
    const paid = await payThroughProvider(app, mockPay, [{ skuId, quantity: 2 }]);
    const caller = (over: AppContext = app) =>
      createCaller({ app: over, userId: paid.userId, requestId: randomUUID() });
    const lineRefund = async (over?: AppContext) => {
      const refundNo = `R-${randomUUID()}`;
      await caller(over).refunds.create({ orderId: paid.orderId, refundNo, lines: [{ skuId, quantity: 1 }] });
      const [row] = await app.db.$client<{ provider_refund_no: string; status: string }[]>`
        SELECT provider_refund_no, status FROM refund_order WHERE refund_no = ${refundNo}`;
      return { refundNo, providerRefundNo: row?.provider_refund_no ?? "", status: row?.status };
    };
    const stock = async () =>
      (await app.db.$client<{ stock: number }[]>`SELECT stock FROM sku WHERE id = ${skuId}`)[0]?.stock;
    const statusOf = async (refundNo: string) =>
      (
        await app.db.$client<
          { status: string }[]
        >`SELECT status FROM refund_order WHERE refund_no = ${refundNo}`
      )[0]?.status;
    return { ...paid, skuId, lineRefund, stock, statusOf };
  }
  const away = (app: AppContext) => ({
    ...app,
    payments: { ...app.payments, providerBaseUrl: "http://127.0.0.1:1" },
  });

  test("a unit it gave back is paid for by another refund's Retry; the other's goods, returned, go back to stock too", async ({
    app,
    mockPay,
  }) => {
    const order = await twoUnits(app, mockPay);
    // One line refund rejected before the order ships (its unit ships), one under way when it ships (its unit
    // stays behind) and rejected after.
    await mockPayFault(mockPay, order.outTradeNo, "REJECT_REFUNDS", 1);
    const shipped = await order.lineRefund();
    expect(shipped.status).toBe("REFUND_FAILED");
    const behind = await order.lineRefund(away(app));
    await consumeOrderEvents(app.db, order.orderId);
    await mockPayFault(mockPay, order.outTradeNo, "REJECT_REFUNDS", 1);
    await submitPendingRefunds(app.db, app.payments);
    expect(await order.statusOf(behind.refundNo)).toBe("REFUND_FAILED");

    expect(
      (await repairWhatIsSafe(app.db, { lagSeconds: 0 })).filter((r) => r.orderId === order.orderId),
    ).toEqual([{ kind: "stock", orderId: order.orderId, skuId: order.skuId, quantity: 1 }]);
    // The first Retry pays for the unit that never shipped (units are alike); the second is a return of the one
    // the shopper has.
    await retryFailedRefund(app.db, shipped.providerRefundNo, app.payments);
    expect(await retryFailedRefund(app.db, behind.providerRefundNo, app.payments)).toBe(
      "REFUND_AWAITING_GOODS",
    );
    await receiveReturn(app.db, behind.providerRefundNo, `scan-${randomUUID()}`, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, order.orderId);
    expect([await order.statusOf(shipped.refundNo), await order.statusOf(behind.refundNo)]).toEqual([
      "REFUND_SUCCESS",
      "REFUND_SUCCESS",
    ]);
    // Both units back: the one that never shipped (the repair's), the one returned (its receipt's).
    expect(await order.stock()).toBe(10);
    expect(await violationsOf(app.db, order.orderId)).toEqual([]);
  });

  test("a return received whose stock the consumer has yet to give back is not the repair's", async ({
    app,
    mockPay,
  }) => {
    const order = await twoUnits(app, mockPay);
    await mockPayFault(mockPay, order.outTradeNo, "REJECT_REFUNDS", 1);
    expect((await order.lineRefund()).status).toBe("REFUND_FAILED");
    await consumeOrderEvents(app.db, order.orderId);
    const returned = await order.lineRefund();
    expect(returned.status).toBe("REFUND_AWAITING_GOODS");
    await receiveReturn(app.db, returned.providerRefundNo, `scan-${randomUUID()}`, app.payments);
    await deliverAll(mockPay);
    expect(await order.statusOf(returned.refundNo)).toBe("REFUND_SUCCESS");
    // Refunded, its ReturnReceived not consumed yet (the worker is behind): the unit is the consumer's to give back.
    expect(
      (await repairWhatIsSafe(app.db, { lagSeconds: 0 })).filter((r) => r.orderId === order.orderId),
    ).toEqual([]);
    await consumeOrderEvents(app.db, order.orderId);
    expect(await order.stock()).toBe(9);
    expect(
      (await violationsOf(app.db, order.orderId)).filter((v) => !v.startsWith("no-failed-refund-unnoticed")),
    ).toEqual([]);
  });
});
