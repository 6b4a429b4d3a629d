import { randomUUID } from "node:crypto";
import { orderLedger } from "~/server/ledger/ledger";
import { reconcile } from "~/server/reconciliation/reconcile";
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
} from "./support/scenarios";

/**
 * The money ledger: every movement of money posted once, in the transaction of the state change that
 * causes it, under its fact's key; the three records (ledger, state tables, MockPay's own) agree.
 */

async function transfersOf(database: TestDatabase, orderId: string) {
  return database.sql<{ fact: string; from_account: string; to_account: string; amount: number }[]>`
    SELECT regexp_replace(fact_key, ':[^:]*[0-9a-f]{8}-[^:]*|:T[^:]*', ':<id>', 'g') AS fact,
           from_account, to_account, amount_cents::int AS amount
      FROM ledger_transfer WHERE order_id = ${orderId} ORDER BY id`;
}

const threeWays = async (db: Parameters<typeof reconcile>[0]) =>
  (await reconcile(db, { lagSeconds: 0 })).invariants
    .filter((i) => ["money-conserved", "ledger-agrees", "ledger-agrees-with-provider"].includes(i.name))
    .flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`));

describe("the money ledger", () => {
  test("a payment, a partial refund and the rest: each movement once, balances back to zero", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await caller.refunds.create({ orderId: paid.orderId, refundNo: randomUUID(), amountCents: 500 });
    await deliverAll(mockPay);
    expect(await caller.orders.money({ orderId: paid.orderId })).toMatchObject({
      paidCents: 2500,
      backCents: 500,
      keptCents: 2000,
      refundableCents: 2000,
    });
    await caller.refunds.create({ orderId: paid.orderId, refundNo: randomUUID(), amountCents: 2000 });
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    expect(await transfersOf(database, paid.orderId)).toEqual([
      { fact: "capture:<id>", from_account: "shopper", to_account: "revenue", amount: 2500 },
      { fact: "refund:<id>:1:owed", from_account: "revenue", to_account: "refunds_payable", amount: 500 },
      { fact: "refund:<id>:paid", from_account: "refunds_payable", to_account: "shopper", amount: 500 },
      { fact: "refund:<id>:1:owed", from_account: "revenue", to_account: "refunds_payable", amount: 2000 },
      { fact: "refund:<id>:paid", from_account: "refunds_payable", to_account: "shopper", amount: 2000 },
    ]);
    const ledger = await orderLedger(app.db, paid);
    expect(ledger.payments.map((p) => p.balances)).toEqual([{ shopper: 0, revenue: 0, refunds_payable: 0 }]);
    expect(await caller.orders.money({ orderId: paid.orderId })).toEqual({
      currency: "USD",
      paidCents: 2500,
      backCents: 2500,
      onItsWayCents: 0,
      keptCents: 0,
      refundableCents: 0,
    });
    // Another shopper's order has no money to show: it does not exist for them.
    await expect(
      createCaller({ app, userId: randomUUID(), requestId: randomUUID() }).orders.money({
        orderId: paid.orderId,
      }),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await threeWays(app.db)).toEqual([]);
  });

  test("twenty copies of a success, and of a refund's success, at once: one capture, one refund paid", async ({
    app,
    mockPay,
    database,
  }) => {
    const { caller, orderId, payment, confirm } = await orderAwaitingPayment(app, mockPay);
    const trade = await confirm();
    const success = {
      ...factAbout(app, { ...payment, currency: "USD" }),
      type: "payment.succeeded",
      transaction_id: trade.transactionId,
    };
    const answers = await Promise.all(Array.from({ length: 20 }, () => notifyAsProvider(app, success)));
    expect(answers.every((answer) => answer.httpStatus === 200)).toBe(true);
    await deliverAll(mockPay);
    // MockPay's refund notification, twenty times at once (its queue delivers it too).
    await mockPayFault(mockPay, payment.outTradeNo, "DROP_ON");
    await caller.refunds.create({ orderId, refundNo: randomUUID(), amountCents: payment.amountCents });
    const [refund] = await database.sql<{ provider_refund_no: string }[]>`
      SELECT provider_refund_no FROM refund_order WHERE order_id = ${orderId}`;
    const refunded = {
      ...factAbout(app, { ...payment, currency: "USD" }),
      type: "refund.succeeded",
      transaction_id: trade.transactionId,
      refund_no: refund?.provider_refund_no,
    };
    await Promise.all(Array.from({ length: 20 }, () => notifyAsProvider(app, refunded)));
    expect((await transfersOf(database, orderId)).map((t) => t.fact)).toEqual([
      "capture:<id>",
      "refund:<id>:1:owed",
      "refund:<id>:paid",
    ]);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(await threeWays(app.db)).toEqual([]);
  });

  test("MockPay's own records disagreeing with the ledger are named, payment and amounts", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await caller.refunds.create({ orderId: paid.orderId, refundNo: randomUUID(), amountCents: 250 });
    await deliverAll(mockPay);
    expect(await threeWays(app.db)).toEqual([]);
    // MockPay refunded more than the merchant knows of (a refund row altered there).
    await database.sql`UPDATE provider_refund SET amount_cents = 300, updated_at = now() - interval '1 hour'
                        WHERE trade_id = (SELECT id FROM provider_trade WHERE out_trade_no = ${paid.outTradeNo})`;
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(report.invariants.find((i) => i.name === "ledger-agrees-with-provider")?.violations).toEqual([
      {
        message: "the provider holds another amount than the ledger says the shopper paid",
        rows: [
          expect.objectContaining({
            out_trade_no: paid.outTradeNo,
            order_id: paid.orderId,
            at_provider: String(paid.amountCents - 300),
            in_ledger: String(paid.amountCents - 250),
          }),
        ],
      },
    ]);
    await database.sql`UPDATE provider_refund SET amount_cents = 250
                        WHERE trade_id = (SELECT id FROM provider_trade WHERE out_trade_no = ${paid.outTradeNo})`;
    expect(await threeWays(app.db)).toEqual([]);
  });

  test("a refund MockPay accepted and then failed: failed here, its money back in what the order keeps, and a Retry refunds it", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    await mockPayFault(mockPay, paid.outTradeNo, "FAIL_REFUNDS");
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const refundNo = randomUUID();
    await caller.refunds.create({ orderId: paid.orderId, refundNo, amountCents: 1250 });
    await deliverAll(mockPay);
    const [failed] = await database.sql<
      { status: string; provider_refund_no: string; failure_reason: string }[]
    >`
      SELECT status, provider_refund_no, failure_reason FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(failed).toMatchObject({
      status: "REFUND_FAILED",
      failure_reason: "failed at the provider after it was accepted",
    });
    const ledger = await orderLedger(app.db, paid);
    expect(ledger.payments[0]?.balances).toEqual({ shopper: -1250, revenue: 1250, refunds_payable: 0 });
    // A late copy of the failure, after the Retry was accepted as attempt 2, changes nothing.
    const { retryFailedRefund } = await import("~/server/refunds/retry-refund");
    expect(await retryFailedRefund(app.db, failed?.provider_refund_no ?? "", app.payments)).toBe(
      "REFUND_PROCESSING",
    );
    const stale = await notifyAsProvider(app, {
      ...factAbout(app, { outTradeNo: paid.outTradeNo, amountCents: 1250, currency: "USD" }),
      type: "refund.failed",
      transaction_id: null,
      refund_no: failed?.provider_refund_no,
      refund_attempt: 1,
    });
    expect(stale.httpStatus).toBe(200);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    const [after] =
      await database.sql`SELECT status, attempt FROM refund_order WHERE refund_no = ${refundNo}`;
    expect(after).toEqual({ status: "REFUND_SUCCESS", attempt: 2 });
    expect((await transfersOf(database, paid.orderId)).map((t) => t.fact)).toEqual([
      "capture:<id>",
      "refund:<id>:1:owed",
      "refund:<id>:1:kept",
      "refund:<id>:2:owed",
      "refund:<id>:paid",
    ]);
    expect(await threeWays(app.db)).toEqual([]);
  });

  test("a refund MockPay decided without a word is found by the status query", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    await mockPayFault(mockPay, paid.outTradeNo, "SILENT_REFUNDS");
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    const refundNo = randomUUID();
    await caller.refunds.create({ orderId: paid.orderId, refundNo, amountCents: 1250 });
    await deliverAll(mockPay);
    const status = async () =>
      (await database.sql`SELECT status FROM refund_order WHERE refund_no = ${refundNo}`)[0]?.status;
    expect(await status()).toBe("REFUND_PROCESSING");
    const { syncStalePayments } = await import("~/server/payments/status-query");
    await database.sql`UPDATE refund_order SET updated_at = now() - interval '10 minutes' WHERE refund_no = ${refundNo}`;
    await syncStalePayments(app.db, app.payments, { olderThanS: 60 });
    expect(await status()).toBe("REFUND_SUCCESS");
    await submitPendingRefunds(app.db, app.payments);
    expect(await threeWays(app.db)).toEqual([]);
  });
});
