import { randomUUID } from "node:crypto";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import type { AppContext } from "~/server/app-context";
import { reconcile } from "~/server/reconciliation/reconcile";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { createCaller } from "~/server/trpc/root";
import { SIGNATURE_HEADER, signBody } from "~/shared/provider-contract";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import { deliverAll, payThroughProvider } from "./support/scenarios";

/** A provider that rejects every refund (signed, so the merchant believes it). */
function rejectingProvider(app: AppContext): AppContext {
  const fetchFn: typeof fetch = async (_url, init) => {
    const request = JSON.parse(String(init?.body)) as { refund_no: string };
    const body = JSON.stringify({ refund_no: request.refund_no, status: "REJECTED", reason: "risk control" });
    return new Response(body, {
      headers: {
        [SIGNATURE_HEADER]: signBody(app.payments.webhookSecret, body, Math.floor(Date.now() / 1000)),
      },
    });
  };
  return { ...app, payments: { ...app.payments, fetchFn } };
}

async function refundRow(database: TestDatabase, refundNo: string) {
  const [row] =
    await database.sql`SELECT status, failure_reason FROM refund_order WHERE refund_no = ${refundNo}`;
  return row;
}

describe("a refund the provider rejected", () => {
  test("is visible (alert, reconciliation) and a Retry with the same refund number refunds it once", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
    const refundNo = `R-${randomUUID()}`;
    const rejecting = rejectingProvider(app);
    await createCaller({ app: rejecting, userId: paid.userId, requestId: randomUUID() }).refunds.create({
      orderId: paid.orderId,
      refundNo,
      amountCents: paid.amountCents,
    });
    expect(await refundRow(database, refundNo)).toEqual({
      status: "REFUND_FAILED",
      failure_reason: "risk control",
    });
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).toContain("refund_failed");
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(report.invariants.find((i) => i.name === "no-failed-refund-unnoticed")?.violations).toHaveLength(
      1,
    );

    // Ten operators press Retry at once: one submission, one refund at MockPay.
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () => retryFailedRefund(app.db, refundNo, app.payments)),
    );
    expect(statuses).toContain("REFUND_PROCESSING");
    await deliverAll(mockPay);
    expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");
    const [atProvider] =
      await database.sql`SELECT count(*)::int AS n FROM provider_refund WHERE refund_no = ${refundNo}`;
    expect(atProvider?.n).toBe(1);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).not.toContain("refund_failed");
    // Retrying a refund that succeeded changes nothing.
    expect(await retryFailedRefund(app.db, refundNo, app.payments)).toBe("REFUND_SUCCESS");
  });

  test("cannot be retried past what is left once another refund took the rest", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
    const failed = `R-${randomUUID()}`;
    await createCaller({
      app: rejectingProvider(app),
      userId: paid.userId,
      requestId: randomUUID(),
    }).refunds.create({
      orderId: paid.orderId,
      refundNo: failed,
      amountCents: paid.amountCents,
    });
    // The shopper asks again with a new refund number, and that one goes through.
    await createCaller({ app, userId: paid.userId, requestId: randomUUID() }).refunds.create({
      orderId: paid.orderId,
      refundNo: `R-${randomUUID()}`,
      amountCents: paid.amountCents,
    });
    await expect(retryFailedRefund(app.db, failed, app.payments)).rejects.toMatchObject({
      code: "REFUND_EXCEEDS_PAID",
    });
    expect((await refundRow(database, failed))?.status).toBe("REFUND_FAILED");
  });
});
