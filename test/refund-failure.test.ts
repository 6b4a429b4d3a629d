import { randomUUID } from "node:crypto";
import { runAdminAction } from "~/mockpay/server/admin";
import type { MockPayContext } from "~/mockpay/server/context";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import type { AppContext } from "~/server/app-context";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { postToProvider } from "~/server/payments/provider-client";
import { reconcile } from "~/server/reconciliation/reconcile";
import { retryFailedRefund } from "~/server/refunds/retry-refund";
import { submitPendingRefunds, submitRefund } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { REFUND_API, refundAnswerSchema, SIGNATURE_HEADER, signBody } from "~/shared/provider-contract";
import type { TestDatabase } from "./support/database";
import { describe, expect, test } from "./support/fixtures";
import {
  consumeOrderEvents,
  deliverAll,
  lineRefundToSend,
  mockPayFault,
  payThroughProvider,
} from "./support/scenarios";

/** A provider that rejects every refund (signed, so the merchant believes it). */
function rejectingProvider(app: AppContext): AppContext {
  const fetchFn: typeof fetch = async (_url, init) => {
    const request = JSON.parse(String(init?.body)) as { refund_no: string };
    const body = JSON.stringify({ refund_no: request.refund_no, status: "REJECTED", reason: "risk control" });
    return new Response(body, {
      headers: {
        [SIGNATURE_HEADER]: signBody(
          "refundAnswer",
          app.payments.webhookSecret,
          body,
          Math.floor(Date.now() / 1000),
        ),
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

/** What the operator's Retry names: the number the provider knows the refund by. */
async function providerNoOf(database: TestDatabase, refundNo: string) {
  const [row] = await database.sql<{ provider_refund_no: string }[]>`
    SELECT provider_refund_no FROM refund_order WHERE refund_no = ${refundNo}`;
  if (!row) throw new Error(`no refund ${refundNo}`);
  return row.provider_refund_no;
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
    const providerNo = await providerNoOf(database, refundNo);
    const statuses = await Promise.all(
      Array.from({ length: 10 }, () => retryFailedRefund(app.db, providerNo, app.payments)),
    );
    expect(statuses).toContain("REFUND_PROCESSING");
    await deliverAll(mockPay);
    expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");
    const [atProvider] =
      await database.sql`SELECT count(*)::int AS n FROM provider_refund WHERE refund_no = ${providerNo}`;
    expect(atProvider?.n).toBe(1);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).not.toContain("refund_failed");
    // Retrying a refund that succeeded changes nothing.
    expect(await retryFailedRefund(app.db, providerNo, app.payments)).toBe("REFUND_SUCCESS");
  });

  test("is superseded once another refund takes what it would return: no alert, no Retry refunds it", async ({
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
    expect((await refundRow(database, failed))?.status).toBe("REFUND_FAILED");
    // The shopper asks again with a new refund number, and that one goes through.
    const second = `R-${randomUUID()}`;
    await createCaller({ app, userId: paid.userId, requestId: randomUUID() }).refunds.create({
      orderId: paid.orderId,
      refundNo: second,
      amountCents: paid.amountCents,
    });
    expect(await refundRow(database, failed)).toEqual({
      status: "REFUND_SUPERSEDED",
      failure_reason: `risk control; superseded: refund ${second} returned what it would have`,
    });
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).not.toContain("refund_failed");
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(report.invariants.find((i) => i.name === "no-failed-refund-unnoticed")?.violations).toEqual([]);
    // A Retry pressed on a stale page says where it stands and refunds nothing.
    expect(await retryFailedRefund(app.db, await providerNoOf(database, failed), app.payments)).toBe(
      "REFUND_SUPERSEDED",
    );
    expect((await refundRow(database, failed))?.status).toBe("REFUND_SUPERSEDED");
  });

  test("a smaller one that still fits beside the next refund stays failed and can be retried", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
    const half = Math.floor(paid.amountCents / 2);
    const failed = `R-${randomUUID()}`;
    await createCaller({
      app: rejectingProvider(app),
      userId: paid.userId,
      requestId: randomUUID(),
    }).refunds.create({ orderId: paid.orderId, refundNo: failed, amountCents: half });
    await createCaller({ app, userId: paid.userId, requestId: randomUUID() }).refunds.create({
      orderId: paid.orderId,
      refundNo: `R-${randomUUID()}`,
      amountCents: half,
    });
    expect((await refundRow(database, failed))?.status).toBe("REFUND_FAILED");
    expect(await retryFailedRefund(app.db, await providerNoOf(database, failed), app.payments)).toBe(
      "REFUND_PROCESSING",
    );
  });

  test("accepted by MockPay and failed there, then superseded by a full refund that succeeded: MockPay and the merchant agree (the chaos run's seed 1 × 200)", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 2 }]);
    const caller = createCaller({ app, userId: paid.userId, requestId: randomUUID() });
    await mockPayFault(mockPay, paid.outTradeNo, "FAIL_REFUNDS");
    const part = `R-${randomUUID()}`;
    await caller.refunds.create({ orderId: paid.orderId, refundNo: part, amountCents: 500 });
    await deliverAll(mockPay);
    expect((await refundRow(database, part))?.status).toBe("REFUND_FAILED");
    // The shopper asks for the whole amount instead; it goes through and leaves the partial one no room.
    const whole = `R-${randomUUID()}`;
    await caller.refunds.create({ orderId: paid.orderId, refundNo: whole, amountCents: paid.amountCents });
    await deliverAll(mockPay);
    expect((await refundRow(database, whole))?.status).toBe("REFUND_SUCCESS");
    expect((await refundRow(database, part))?.status).toBe("REFUND_SUPERSEDED");
    // MockPay holds the partial refund as FAILED: it refunded nothing for it, so nothing disagrees.
    const [atProvider] = await database.sql`SELECT status FROM provider_refund
                                             WHERE refund_no = ${await providerNoOf(database, part)}`;
    expect(atProvider?.status).toBe("FAILED");
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(violationsOf(report, paid.orderId)).toEqual([]);
    // The other way round holds too: a refund the merchant holds as succeeded that MockPay failed is reported
    // (planted, then put back: the file's other tests read the same database's alerts).
    await database.sql`UPDATE refund_order SET status = 'REFUND_SUCCESS' WHERE refund_no = ${part}`;
    expect(
      (await reconcile(app.db, { lagSeconds: 0 })).invariants
        .find((i) => i.name === "agrees-with-provider")
        ?.violations.map((v) => v.message),
    ).toEqual(["the merchant's refund succeeded, the provider's did not"]);
    await database.sql`UPDATE refund_order SET status = 'REFUND_SUPERSEDED' WHERE refund_no = ${part}`;
  });

  test("MockPay's reject-refunds fault: the next refund is rejected at MockPay itself, and the Retry gets it through", async ({
    app,
    mockPay,
    database,
  }) => {
    const { paid, refundNo } = await fullRefundRejectedOnceAtMockPay(app, mockPay);
    expect(await refundRow(database, refundNo)).toMatchObject({ status: "REFUND_FAILED" });
    expect((await refundRow(database, refundNo))?.failure_reason).toMatch(/risk control/);
    expect(await retryFailedRefund(app.db, await providerNoOf(database, refundNo), app.payments)).toBe(
      "REFUND_PROCESSING",
    );
    await deliverAll(mockPay);
    expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");
    const [trade] =
      await database.sql`SELECT reject_refunds FROM provider_trade WHERE out_trade_no = ${paid.outTradeNo}`;
    expect(trade?.reject_refunds).toBe(0);
  });

  test("the shopper's rejected refund, then the order turns out short of stock: the automatic refund supersedes it", async ({
    app,
    mockPay,
    database,
  }) => {
    const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
    const failed = `R-${randomUUID()}`;
    await createCaller({
      app: rejectingProvider(app),
      userId: paid.userId,
      requestId: randomUUID(),
    }).refunds.create({ orderId: paid.orderId, refundNo: failed, amountCents: paid.amountCents });
    await runOutOfStockAndConsume(app, database, paid.orderId);
    const [auto] = await database.sql`
      SELECT status, amount_cents::int FROM refund_order WHERE order_id = ${paid.orderId} AND refund_no LIKE 'sys/auto/%'`;
    expect(auto).toMatchObject({ amount_cents: paid.amountCents });
    expect((await refundRow(database, failed))?.status).toBe("REFUND_SUPERSEDED");
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).not.toContain("refund_failed");
  });
});

/**
 * Two submissions of one refund raced: MockPay's reject-refunds fault took the first, and the merchant
 * recorded that rejection; the second, arriving just after, was accepted — as a real provider may accept
 * a refund number it rejected once. This sends that second submission.
 */
async function racingSubmission(app: AppContext, database: TestDatabase, refundNo: string) {
  const [row] = await database.sql<
    { out_trade_no: string; provider_refund_no: string; amount_cents: string }[]
  >`
    SELECT p.out_trade_no, r.provider_refund_no, r.amount_cents FROM refund_order r
      JOIN payment_order p ON p.id = r.payment_id WHERE r.refund_no = ${refundNo}`;
  if (!row) throw new Error(`no refund ${refundNo}`);
  const answer = await postToProvider(
    app.payments,
    REFUND_API,
    {
      app_id: app.payments.appId,
      out_trade_no: row.out_trade_no,
      refund_no: row.provider_refund_no,
      amount_cents: Number(row.amount_cents),
      currency: "USD",
    },
    refundAnswerSchema,
  );
  expect(answer.status).toBe("ACCEPTED");
}

/**
 * What reconciliation finds wrong with this order (other tests in this file leave refunds in flight on
 * purpose; outbox events are not relayed here, so that check waits for a worker these tests do not run).
 */
function violationsOf(report: Awaited<ReturnType<typeof reconcile>>, orderId: string): string[] {
  return report.invariants
    .filter((i) => i.name !== "events-delivered")
    .flatMap((i) =>
      i.violations
        .filter((v) => JSON.stringify(v.rows).includes(orderId))
        .map((v) => `${i.name}: ${v.message}`),
    );
}

/** The stock consumer runs for an order whose SKU has run out; the automatic refund follows if it is short. */
async function runOutOfStockAndConsume(app: AppContext, database: TestDatabase, orderId: string) {
  const [{ stock } = { stock: 0 }] = await database.sql<{ stock: number }[]>`
    UPDATE sku SET stock = 0 WHERE id = 'SKU-MUG' RETURNING (SELECT stock FROM sku WHERE id = 'SKU-MUG') AS stock`;
  try {
    for (const [type, consumer] of [
      ["OrderPaid", "stock"],
      ["StockShort", "auto-refund"],
    ] as const) {
      const events = await database.sql<{ id: string }[]>`
        SELECT id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = ${type}`;
      for (const { id } of events) await handleConsumeJob(app.db, { eventId: id, consumer });
    }
  } finally {
    await database.sql`UPDATE sku SET stock = ${stock} WHERE id = 'SKU-MUG'`;
  }
}

/** A paid mug whose full refund the shopper asks for while MockPay's reject-refunds fault is armed (once). */
async function fullRefundRejectedOnceAtMockPay(app: AppContext, mockPay: MockPayContext) {
  const paid = await payThroughProvider(app, mockPay, [{ skuId: "SKU-MUG", quantity: 1 }]);
  await runAdminAction(
    mockPay.db,
    mockPay.appId,
    paid.outTradeNo,
    { action: "REJECT_REFUNDS", count: 1, delayS: 30 },
    mockPay.delivery,
  );
  const refundNo = `R-${randomUUID()}`;
  await createCaller({ app, userId: paid.userId, requestId: randomUUID() }).refunds.create({
    orderId: paid.orderId,
    refundNo,
    amountCents: paid.amountCents,
  });
  return { paid, refundNo };
}

/**
 * The provider's answers held until every send that reached it was answered (or none came for 200 ms), then let
 * through rejections first: the order in which two sends' answers arrive is the network's.
 */
function rejectionsAnswerFirst(app: AppContext): { app: AppContext; heard: () => number } {
  const real = app.payments.fetchFn ?? fetch;
  let heard = 0;
  const held: { rejected: boolean; release: () => void }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const releaseAll = () => {
    for (const answer of held.sort((a, b) => Number(b.rejected) - Number(a.rejected))) answer.release();
    held.length = 0;
  };
  const fetchFn: typeof fetch = async (url, init) => {
    heard++;
    const response = await real(url, init);
    const body = await response.text();
    await new Promise<void>((release) => {
      held.push({ rejected: body.includes('"REJECTED"'), release });
      clearTimeout(timer);
      timer = setTimeout(releaseAll, 200);
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return { app: { ...app, payments: { ...app.payments, fetchFn } }, heard: () => heard };
}

describe("one refund sent by many at once (the request's send, the background submitter, a second worker)", () => {
  test("while MockPay rejects the first send it hears and accepts the next: only one send goes, so a refund recorded as rejected is one MockPay did not make (the shipment that follows carries its unit, and a Retry makes it a return)", async ({
    app,
    mockPay,
    database,
  }) => {
    const { paid, refundNo } = await lineRefundToSend(app, mockPay);
    await mockPayFault(mockPay, paid.outTradeNo, "REJECT_REFUNDS", 1);
    const providerNo = await providerNoOf(database, refundNo);
    const network = rejectionsAnswerFirst(app);
    const statuses = await Promise.all(
      Array.from({ length: 8 }, () => submitRefund(app.db, providerNo, network.app.payments).catch(String)),
    );

    // The order ships (a rejected refund holds nothing back), and MockPay tells all it did: nothing was refunded.
    await consumeOrderEvents(app.db, paid.orderId);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, paid.orderId);
    const [after] = await database.sql<{ status: string; shipped: number; provider: string | null }[]>`
      SELECT r.status, (SELECT sum(quantity)::int FROM shipment_line WHERE order_id = r.order_id) AS shipped,
             (SELECT status FROM provider_refund WHERE refund_no = r.provider_refund_no) AS provider
        FROM refund_order r WHERE r.refund_no = ${refundNo}`;
    expect(after).toEqual({ status: "REFUND_FAILED", shipped: 2, provider: null });
    expect(
      violationsOf(await reconcile(app.db, { lagSeconds: 0 }), paid.orderId).filter(
        (found) => !found.startsWith("no-failed-refund-unnoticed"),
      ),
    ).toEqual([]);
    // One send reached MockPay; the others found the refund claimed and left it to that one.
    expect(network.heard()).toBe(1);
    expect(statuses).toContain("REFUND_FAILED");
    expect(statuses.every((status) => status === "REFUND_FAILED" || status === "REFUND_CREATED")).toBe(true);
    // Its goods with the shopper, the operator's Retry makes it a return.
    expect(await retryFailedRefund(app.db, providerNo, app.payments)).toBe("REFUND_AWAITING_GOODS");
  });

  test("a send the provider did not answer in time holds the refund until its claim lapses; one that never connected frees it at once; a Retry frees it", async ({
    app,
    mockPay,
    database,
  }) => {
    const { paid, refundNo } = await lineRefundToSend(app, mockPay);
    const claimOf = async () => {
      const [row] = await database.sql<{ status: string; claimed: boolean }[]>`
        SELECT status, send_until > now() AS claimed FROM refund_order WHERE refund_no = ${refundNo}`;
      return row;
    };
    // Its first send found nothing listening (connection refused): the next may go at once.
    expect(await claimOf()).toEqual({ status: "REFUND_CREATED", claimed: null });

    const slow: typeof fetch = async () => {
      throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
    };
    const timingOut = { ...app.payments, fetchFn: slow };
    await expect(submitRefund(app.db, await providerNoOf(database, refundNo), timingOut)).rejects.toThrow();
    expect(await claimOf()).toEqual({ status: "REFUND_CREATED", claimed: true });
    // The background submitter leaves it to the send under way, until the claim lapses.
    await submitPendingRefunds(app.db, app.payments);
    expect(await claimOf()).toEqual({ status: "REFUND_CREATED", claimed: true });
    await database.sql`UPDATE refund_order SET send_until = now() - interval '1 second' WHERE refund_no = ${refundNo}`;
    await submitPendingRefunds(app.db, app.payments);
    expect(await claimOf()).toEqual({ status: "REFUND_PROCESSING", claimed: null });
    await deliverAll(mockPay);
    expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");

    // A rejected refund still holding an earlier send's claim: the Retry's send goes all the same.
    const rejected = await fullRefundRejectedOnceAtMockPay(app, mockPay);
    await database.sql`
      UPDATE refund_order SET send_claim = gen_random_uuid(), send_until = now() + interval '1 minute'
       WHERE refund_no = ${rejected.refundNo}`;
    expect(
      await retryFailedRefund(app.db, await providerNoOf(database, rejected.refundNo), app.payments),
    ).toBe("REFUND_PROCESSING");
    expect(paid.orderId).not.toBe(rejected.paid.orderId);
  });
});

describe("a refund the merchant recorded as rejected, that MockPay made after all", () => {
  test("its success notification applies it: the refund succeeds, the order is refunded, nothing alerts", async ({
    app,
    mockPay,
    database,
  }) => {
    const { paid, refundNo } = await fullRefundRejectedOnceAtMockPay(app, mockPay);
    expect((await refundRow(database, refundNo))?.status).toBe("REFUND_FAILED");
    await racingSubmission(app, database, refundNo);
    await deliverAll(mockPay);

    expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
    expect(order?.status).toBe("REFUNDED");
    expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).toEqual([]);
    const report = await reconcile(app.db, { lagSeconds: 0 });
    expect(violationsOf(report, paid.orderId)).toEqual([]);
  });

  for (const notified of ["before", "after"] as const) {
    test(`after an automatic refund superseded it (the chaos run's seed 1), MockPay's notification ${notified} the automatic refund is submitted: the automatic one ends superseded, the order refunded`, async ({
      app,
      mockPay,
      database,
    }) => {
      const { paid, refundNo } = await fullRefundRejectedOnceAtMockPay(app, mockPay);
      await racingSubmission(app, database, refundNo);
      // Before MockPay's notification arrives, the order turns out short of stock.
      await runOutOfStockAndConsume(app, database, paid.orderId);
      expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUPERSEDED");
      const automatic = async () => {
        const [row] = await database.sql<{ status: string; failure_reason: string | null }[]>`
          SELECT status, failure_reason FROM refund_order WHERE order_id = ${paid.orderId} AND refund_no LIKE 'sys/auto/%'`;
        return row;
      };
      if (notified === "before") {
        await deliverAll(mockPay);
        expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");
        // MockPay refuses the automatic refund (it gave everything back already), which is moot now:
        // superseded as the rejection is recorded, never awaiting a person.
        await submitPendingRefunds(app.db, app.payments);
        expect(await automatic()).toMatchObject({ status: "REFUND_SUPERSEDED" });
        expect((await automatic())?.failure_reason).toMatch(
          /exceed.*superseded: other refunds returned what it would have/,
        );
      } else {
        // Refused while the merchant still believes nothing went back: it awaits a person, for now.
        await submitPendingRefunds(app.db, app.payments);
        expect((await automatic())?.status).toBe("REFUND_FAILED");
        await deliverAll(mockPay);
        expect((await refundRow(database, refundNo))?.status).toBe("REFUND_SUCCESS");
        expect((await automatic())?.status).toBe("REFUND_SUPERSEDED");
        expect((await automatic())?.failure_reason).toMatch(
          /superseded: refund .* succeeded at the provider/,
        );
      }
      const [order] = await database.sql`SELECT status FROM orders WHERE id = ${paid.orderId}`;
      expect(order?.status).toBe("REFUNDED");
      expect(alertsFrom(await opsFigures(app.db)).map((alert) => alert.name)).toEqual([]);
      const report = await reconcile(app.db, { lagSeconds: 0 });
      expect(violationsOf(report, paid.orderId)).toEqual([]);
    });
  }
});
