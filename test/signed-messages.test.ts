import { randomUUID } from "node:crypto";
import { processCloseRequest } from "~/mockpay/server/closes";
import { processRefundRequest } from "~/mockpay/server/refunds";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { createCaller } from "~/server/trpc/root";
import { CLOSE_API, REFUND_API, signBody } from "~/shared/provider-contract";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, payThroughProvider } from "./support/scenarios";

/**
 * A captured message of one kind cannot be replayed as another (issue 29): what is signed names the
 * message's kind and direction. MockPay's refund.succeeded notification carries everything a refund request
 * does (app id, trade, refund number, amount, currency), and once parsed as one it was accepted.
 */
describe("a signed message replayed as another kind", () => {
  test("a MockPay notification, sent back to MockPay as a refund or close request, is refused (401)", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await caller.refunds.create({ orderId: paid.orderId, refundNo: randomUUID(), amountCents: 100 });
    await deliverAll(mockPay);
    const [queued] = await database.sql<{ body: unknown }[]>`
      SELECT n.body FROM provider_notification n JOIN provider_trade t ON t.id = n.trade_id
       WHERE t.out_trade_no = ${paid.outTradeNo} AND n.type = 'refund.succeeded'`;
    // As it went over the wire: the body and MockPay's signature of it.
    const body = JSON.stringify(queued?.body);
    const nowS = Math.floor(Date.now() / 1000);
    const captured = { body, signature: signBody("notification", mockPay.webhookSecret, body, nowS) };
    expect((await processRefundRequest(mockPay.db, captured, mockPay.webhookSecret)).status).toBe(401);
    expect((await processCloseRequest(mockPay.db, captured, mockPay.webhookSecret)).status).toBe(401);
    // Signed as what it claims to be, the same body is a request MockPay reads (and refunds nothing more).
    const asRequest = { body, signature: signBody(REFUND_API.request, mockPay.webhookSecret, body, nowS) };
    expect((await processRefundRequest(mockPay.db, asRequest, mockPay.webhookSecret)).status).toBe(200);
    const [refunds] = await database.sql`SELECT count(*)::int AS n FROM provider_refund pr
      JOIN provider_trade t ON t.id = pr.trade_id WHERE t.out_trade_no = ${paid.outTradeNo}`;
    expect(refunds?.n).toBe(1);
  });

  test("MockPay's signed answers, sent to the merchant as notifications, are refused (401) and change nothing", async ({
    app,
    mockPay,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const nowS = Math.floor(Date.now() / 1000);
    // A close request the merchant signed, answered by MockPay: both bodies carry a trade number.
    const close = JSON.stringify({
      app_id: app.payments.appId,
      out_trade_no: paid.outTradeNo,
      amount_cents: paid.amountCents,
      currency: "USD",
    });
    const answer = await processCloseRequest(
      mockPay.db,
      { body: close, signature: signBody(CLOSE_API.request, app.payments.webhookSecret, close, nowS) },
      mockPay.webhookSecret,
    );
    expect(answer.status).toBe(200);
    for (const replayed of [
      { body: answer.body, signature: answer.signature },
      { body: close, signature: signBody(CLOSE_API.request, app.payments.webhookSecret, close, nowS) },
    ]) {
      const heard = await handlePaymentNotification(
        app.db,
        { ...replayed, deliveryId: randomUUID() },
        app.payments,
      );
      expect(heard.httpStatus).toBe(401);
    }
  });
});
