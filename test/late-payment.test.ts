import { randomUUID } from "node:crypto";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import { reconcile } from "~/server/reconciliation/reconcile";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { outstanding } from "../scripts/lib/chaos/checks";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, factAbout, notifyAsProvider, orderAwaitingPayment } from "./support/scenarios";

/** Money that arrives for an order no longer waiting for it goes back, once, and the order keeps its state. */
const notify = notifyAsProvider;
const fact = factAbout;

describe("a success that arrives after the order stopped waiting for it", () => {
  test("a close that overtook the success, then a cancel: the late money is refunded in full, the order stays CLOSED", async ({
    app,
    mockPay,
    database,
  }) => {
    const { caller, orderId, payment, confirm } = await orderAwaitingPayment(app, mockPay);
    const paidAtMockPay = await confirm();
    // The notifications cross: a close reaches the merchant first, and the shopper cancels.
    expect(
      (await notify(app, { ...fact(app, payment), type: "payment.closed", transaction_id: null })).httpStatus,
    ).toBe(200);
    expect(await caller.orders.cancel({ orderId })).toMatchObject({ status: "CLOSED" });

    // The success arrives (ten copies at once): one late payment, one automatic refund.
    const success = {
      ...fact(app, payment),
      type: "payment.succeeded",
      transaction_id: paidAtMockPay.transactionId,
    };
    const answers = await Promise.all(Array.from({ length: 10 }, () => notify(app, success)));
    expect(answers.every((answer) => answer.httpStatus === 200)).toBe(true);
    await deliverAll(mockPay);
    const [late] = await database.sql`
      SELECT p.status AS payment, o.status AS order, r.refund_no, r.amount_cents::int AS refund, r.status AS refund_status
        FROM payment_order p JOIN orders o ON o.id = p.order_id LEFT JOIN refund_order r ON r.payment_id = p.id
       WHERE p.out_trade_no = ${payment.outTradeNo}`;
    expect(late).toMatchObject({
      payment: "PAID_LATE",
      order: "CLOSED",
      refund_no: `sys/late/${paidAtMockPay.transactionId}`,
      refund: payment.amountCents,
    });
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).toContain("late_payment");
    // The chaos run's settle condition knows this money (it waits for the refund, not for a success
    // that will never come): it once waited on a PAID_LATE payment until its 120 s ran out.
    expect((await outstanding(app.db)).payments_not_yet_known).toBe(0);

    // The refund submitter sends it; MockPay refunds; its notification completes it.
    await submitPendingRefunds(app.db, app.payments);
    await deliverAll(mockPay);
    const [after] = await database.sql`
      SELECT o.status AS order, r.status AS refund, (SELECT count(*)::int FROM refund_order WHERE order_id = o.id) AS refunds,
             (SELECT count(*)::int FROM provider_refund pr WHERE pr.refund_no = r.provider_refund_no) AS at_provider
        FROM orders o JOIN refund_order r ON r.order_id = o.id WHERE o.id = ${orderId}`;
    expect(after).toEqual({ order: "CLOSED", refund: "REFUND_SUCCESS", refunds: 1, at_provider: 1 });
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).not.toContain("late_payment");
    const report = await reconcile(app.db, { lagSeconds: 0 });
    const broken = report.invariants.filter((i) => i.name !== "events-delivered");
    expect(broken.flatMap((i) => i.violations.map((v) => `${i.name}: ${v.message}`))).toEqual([]);
  });

  test("a second payment's success on an order already paid is refunded, and the order keeps its payment", async ({
    app,
    database,
  }) => {
    const userId = randomUUID();
    const caller = createCaller({ app, userId, requestId: randomUUID() });
    const { orderId } = await caller.orders.create({
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const first = await caller.payments.create({ orderId });
    // The first payment is closed here; the shopper pays a second one.
    await notify(app, { ...fact(app, first), type: "payment.closed", transaction_id: null });
    const second = await caller.payments.create({ orderId });
    expect(second.outTradeNo).not.toBe(first.outTradeNo);
    await notify(app, {
      ...fact(app, second),
      type: "payment.succeeded",
      transaction_id: `T-${randomUUID()}`,
    });
    // Then money arrives for the first as well.
    const lateId = `T-${randomUUID()}`;
    const answer = await notify(app, {
      ...fact(app, first),
      type: "payment.succeeded",
      transaction_id: lateId,
    });
    expect(answer.httpStatus).toBe(200);
    const rows = await database.sql`
      SELECT p.out_trade_no, p.status, r.refund_no FROM payment_order p LEFT JOIN refund_order r ON r.payment_id = p.id
       WHERE p.order_id = ${orderId} ORDER BY p.created_at`;
    expect(rows).toEqual([
      { out_trade_no: first.outTradeNo, status: "PAID_LATE", refund_no: `sys/late/${lateId}` },
      { out_trade_no: second.outTradeNo, status: "SUCCESS", refund_no: null },
    ]);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("PAID");
  });
});
