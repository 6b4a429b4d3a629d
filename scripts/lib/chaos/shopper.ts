import type { Db } from "~/server/db/client";
import { isTransientError } from "~/shared/postgres-driver";
import { type Answer, ChaosClient, firstValue, sleep } from "./client";
import { CHAOS_ADMIN_TOKEN, type Cluster } from "./cluster";
import type { History } from "./history";
import type { Faults } from "./report";
import { Rng } from "./rng";
import type { WriteLog } from "./write-log";

/** What one shopper did and what every answer said: the run checks the database against it. */
export interface ShopperRecord {
  index: number;
  userId: string;
  /** The session cookie, to ask again as this shopper once the run is over. */
  session: string;
  requestId: string;
  /** The order's lines, as sent (the same request again must be answered the same). */
  items: { skuId: string; quantity: number }[];
  /** Every order id an answer for this request id named (all must be the same one). */
  orderIds: string[];
  /** A business refusal (e.g. OUT_OF_STOCK), stored and replayed for the key. */
  refusals: string[];
  amountCents: number;
  /** Every trade number the pay answers named (one open payment per order). */
  outTradeNos: string[];
  /** The shopper confirmed the payment at MockPay. */
  paid: boolean;
  /** The status the order had when the shopper stopped watching it. */
  lastStatus?: string;
  refunds: {
    refundNo: string;
    amountCents: number;
    statuses: string[];
    refusals: string[];
    /** A return: the lines it named (what they cost is the server's to say). */
    lines?: { skuId: string; quantity: number }[];
  }[];
  /** The shopper was slower than the payment timeout: the pay link had expired, or the order closed before Confirm. */
  tooSlow?: boolean;
  /** The shopper walked away from the order without paying: the timeout must close it. */
  leftUnpaid?: boolean;
  /** The shopper pressed Cancel while pressing Confirm at MockPay: what the cancel said, how the order ended. */
  cancelRace?: { answer: string; finalStatus?: string };
  /** The shopper cancelled an unpaid order, then pressed Confirm on its pay page anyway. */
  confirmedAfterClose?: { cancelAnswer: string };
  /**
   * A payment paid at MockPay whose success was held back while a late `payment.closed` reached the merchant;
   * the shopper paid again (`second`), and the first payment's success arrived in between: it is refunded.
   */
  latePayment?: { first: string; second?: string };
  /** The shopper spent the coupon their paid order earned on two new orders at once, one per instance. */
  couponSpend?: { code: string; requestIds: string[]; answers: string[] };
  /**
   * The payment was paid at MockPay while a crossed `payment.closed` closed it here; the shopper cancelled at
   * the moment the success arrived: what the cancel said, and how the order ended.
   */
  cancelAfterCrossedClose?: { answer: string; finalStatus?: string };
  /** The order's request was sent again after its key expired (a day later, as far as the key is concerned). */
  resentAfterExpiry?: boolean;
  gaveUp?: string;
  /** Answers with a 5xx other than 503. */
  internalErrors: string[];
  sessionChanges: string[];
}

export interface ShopperContext {
  seed: number;
  cluster: Cluster;
  faults: Faults;
  skuIds: readonly string[];
  writes?: WriteLog;
  /** Where each of the shopper's writes and what it was told are logged. */
  history?: History;
  /** The merchant's database, for what a story waits on (a close landed) or makes happen (a day passing). */
  db?: Db;
}

const PAID = new Set(["PAID", "SHIPPED", "STOCK_SHORT", "REFUNDED"]);
/** The product the run keeps scarce (scripts/chaos.ts): some paid orders cannot be filled. */
const SCARCE_SKU = "SKU-GRINDER";
/** Faults MockPay's admin page can inject on a paid trade, and how often each is drawn. */
const PROVIDER_FAULTS = [
  undefined,
  undefined,
  undefined,
  "FIRE_CONCURRENT",
  "TAMPERED_SIGNATURE",
  "WRONG_AMOUNT",
  "STALE_TIMESTAMP",
  "CLOSED_AFTER_SUCCESS",
  "REORDER",
] as const;
const FAULT_NAMES: Record<string, string> = {
  FIRE_CONCURRENT: "5 concurrent duplicate notifications",
  TAMPERED_SIGNATURE: "notification with a tampered signature",
  WRONG_AMOUNT: "notification with a wrong amount",
  STALE_TIMESTAMP: "notification with a stale timestamp",
  CLOSED_AFTER_SUCCESS: "late payment.closed after success (out of order)",
  REORDER: "notifications re-sent newest first (out of order)",
};

/**
 * One shopper's visit: order (maybe with a double or triple click, maybe losing
 * the answer), pay at MockPay (maybe twice, maybe with notifications lost or
 * forged), wait until the order is paid, and sometimes refund. Every choice
 * comes from the shopper's own seeded stream.
 */
export async function runShopper(ctx: ShopperContext, index: number): Promise<ShopperRecord> {
  const plan = Rng.forParticipant(ctx.seed, index);
  // The stories added since (issue 24) draw from a stream of their own, so older seeds keep their plans.
  const later = Rng.forParticipant(ctx.seed, index + 2_000_000);
  const lateStory = later.chance(0.06);
  // And those added since (issue 40) from a third, drawn only where the older plans had nothing left to do.
  const newer = Rng.forParticipant(ctx.seed, index + 3_000_000);
  const client = new ChaosClient(
    ctx.cluster,
    Rng.forParticipant(ctx.seed, index + 1_000_000),
    ctx.faults,
    ctx.writes,
    ctx.history?.for(`shopper ${index}`),
  );
  const record: ShopperRecord = {
    index,
    userId: "",
    session: "",
    requestId: plan.key("order"),
    items: [],
    orderIds: [],
    refusals: [],
    amountCents: 0,
    outTradeNos: [],
    paid: false,
    refunds: [],
    internalErrors: client.internalErrors,
    sessionChanges: client.sessionChanges,
  };
  const { faults } = ctx;
  try {
    await client.visit();
    record.userId = client.userId;
    record.session = client.session;
    const items = pickCart(plan, ctx.skuIds);
    // The late payment's story buys the scarce product, so it can also run short of stock after it.
    if (lateStory && !items.some((item) => item.skuId === SCARCE_SKU))
      items.push({ skuId: SCARCE_SKU, quantity: 1 });
    record.items = items;

    // Order: one, two or three clicks at once; sometimes the first answer is lost after the commit.
    const clicks = plan.pick([1, 1, 1, 2, 2, 3]);
    if (clicks > 1)
      faults.count(clicks === 2 ? "double click on Place order" : "triple click on Place order");
    const loseOrder = plan.chance(0.2);
    const orderAnswers = await Promise.all(
      Array.from({ length: clicks }, (_, i) =>
        client.mutate<{ orderId: string; amountCents: number }>(
          "orders.create",
          { requestId: record.requestId, items },
          { loseFirstAnswer: loseOrder && i === 0 },
        ),
      ),
    );
    collect(orderAnswers, record.orderIds, record.refusals, (v) => v.orderId);
    if (record.refusals.includes("OUT_OF_STOCK"))
      faults.count("order refused: out of stock (stored, replayed)");
    const orderId = record.orderIds[0];
    if (!orderId) return record;
    record.amountCents = firstValue(orderAnswers)?.amountCents ?? 0;
    if (plan.chance(0.08)) {
      faults.count("order left unpaid");
      record.leftUnpaid = true;
      if (plan.chance(0.6)) await confirmAfterClose(client, orderId, record, faults);
      return record;
    }

    // Pay: one or two clicks on Pay, the provider's page, one or two clicks on Confirm.
    const payClicks = plan.pick([1, 1, 2]);
    if (payClicks > 1) faults.count("double click on Pay");
    const payAnswers = await Promise.all(
      Array.from({ length: payClicks }, (_, i) =>
        client.mutate<{ outTradeNo: string; payUrl: string }>(
          "payments.create",
          { orderId },
          { loseFirstAnswer: i === 0 && plan.chance(0.15) },
        ),
      ),
    );
    collect(payAnswers, record.outTradeNos, record.refusals, (v) => v.outTradeNo);
    const payment = firstValue(payAnswers);
    if (!payment) return record;
    if ((await openPayPage(client, payment.payUrl, faults)) === "expired") {
      faults.count("pay link expired before the shopper opened it (order timed out)");
      record.tooSlow = true;
      return record;
    }
    const tradePath = `/provider/api/admin/trades/${encodeURIComponent(payment.outTradeNo)}`;
    if (!lateStory && ctx.db && newer.chance(0.06)) {
      const ended = await cancelAsCrossedSuccessArrives(client, ctx.db, orderId, payment, record, faults);
      if (ended) return record;
    }
    if (lateStory) {
      const story = await payLateThenAgain(client, orderId, payment, record, faults);
      if (!story) return record;
      record.paid = true;
      record.lastStatus = await waitForStatus(client, orderId, (s) => PAID.has(s) || s === "CLOSED", faults);
      return record;
    }
    if (plan.chance(0.12)) {
      await providerAdmin(client, tradePath, "DROP_ON");
      faults.count("all notifications of a payment lost (merchant must ask MockPay)");
    }
    const confirmClicks = plan.pick([1, 1, 2]);
    if (confirmClicks > 1) faults.count("double click on MockPay's Confirm");
    // Sometimes the shopper cancels the order in another tab at the moment they confirm at MockPay.
    const cancelling = plan.chance(0.08)
      ? client.mutate<{ status: string }>("orders.cancel", { orderId })
      : undefined;
    const confirmed = await Promise.all(
      Array.from({ length: confirmClicks }, () =>
        client.httpAnswer(
          `/provider/api/trades/${encodeURIComponent(payment.outTradeNo)}/confirm`,
          confirmForm(payment.payUrl),
          // 410: the pay link expired while the page was open (slower than the payment timeout).
          [303, 410],
        ),
      ),
    );
    if (confirmed.every((answer) => answer.status === 410) && !cancelling) {
      faults.count("pay link expired before the shopper confirmed (order timed out)");
      record.tooSlow = true;
      record.lastStatus = await waitForStatus(client, orderId, (s) => s === "CLOSED" || PAID.has(s), faults);
      return record;
    }
    if (cancelling) {
      faults.count("cancel racing Confirm");
      const answer = await cancelling;
      const race: NonNullable<ShopperRecord["cancelRace"]> = {
        answer: answer.ok ? answer.value.status : (answer.error.data.domainCode ?? answer.error.data.code),
      };
      record.cancelRace = race;
      race.finalStatus = await waitForStatus(client, orderId, (s) => s === "CLOSED" || PAID.has(s), faults);
      // Closed: the Confirm found the trade closed and no money moved.
      if (race.finalStatus === "CLOSED") {
        record.lastStatus = race.finalStatus;
        return record;
      }
    }
    record.paid = true;
    const providerFault = plan.pick(PROVIDER_FAULTS);
    if (providerFault) {
      await providerAdmin(client, tradePath, providerFault);
      faults.count(FAULT_NAMES[providerFault] ?? providerFault);
    }

    record.lastStatus = await waitForStatus(client, orderId, (s) => PAID.has(s) || s === "CLOSED", faults);
    if (record.lastStatus === "CLOSED") {
      // Slower than the payment timeout: the order closed (the trade at MockPay first) before the Confirm.
      faults.count("order timed out before the shopper confirmed");
      record.tooSlow = true;
      record.paid = false;
      return record;
    }
    if (record.lastStatus && ["PAID", "SHIPPED"].includes(record.lastStatus) && plan.chance(0.15)) {
      await spendCouponTwice(client, plan, record, faults);
    }
    if (later.chance(0.12)) {
      // A return: once the order has shipped, one unit of its first line goes back; it is refunded once the
      // operator has the goods (the operator loop presses Received).
      await returnOneItem(client, orderId, record, faults, later);
      return record;
    }
    if (!record.lastStatus || !["PAID", "SHIPPED"].includes(record.lastStatus) || !plan.chance(0.3)) {
      if (record.lastStatus && ["PAID", "SHIPPED"].includes(record.lastStatus) && newer.chance(0.15)) {
        await lineRefundRejectedThenRetried(client, orderId, tradePath, record, faults, newer);
      } else if (ctx.db && newer.chance(0.08)) {
        await resendAfterExpiry(client, ctx.db, record, faults);
      }
      return record;
    }

    // Refund: all or part, with duplicate submissions and a lost answer.
    const full = plan.chance(0.6);
    const amountCents =
      full || record.amountCents < 2 ? record.amountCents : plan.int(1, record.amountCents - 1);
    const refund = {
      refundNo: plan.key("refund"),
      amountCents,
      statuses: [] as string[],
      refusals: [] as string[],
    };
    record.refunds.push(refund);
    if (plan.chance(0.25)) {
      // MockPay's risk control rejects this refund once; an operator's Retry on /admin then gets it through.
      await providerAdmin(client, tradePath, "REJECT_REFUNDS", 1);
      faults.count("MockPay rejected a refund (an operator retries it)");
    }
    if (later.chance(0.15)) {
      // MockPay accepts the refund, then reports it failed: awaiting the operator's Retry, which gets it through.
      await providerAdmin(client, tradePath, "FAIL_REFUNDS", 1);
      faults.count("MockPay accepted a refund, then failed it (an operator retries it)");
    } else if (later.chance(0.12)) {
      // MockPay decides the refund without a word: the merchant's status query must find it.
      await providerAdmin(client, tradePath, "SILENT_REFUNDS", 1);
      faults.count("MockPay decided a refund without notifying (the merchant asks)");
    }
    if (!full && later.chance(0.25)) {
      // This partial refund is rejected; the shopper asks for the whole amount, which supersedes it and is
      // rejected too: the partial one awaits the operator again, and whichever Retry lands first wins.
      await providerAdmin(client, tradePath, "REJECT_REFUNDS", 2);
      await requestRefund(client, orderId, refund);
      const whole = {
        refundNo: later.key("refund-all"),
        amountCents: record.amountCents,
        statuses: [] as string[],
        refusals: [] as string[],
      };
      record.refunds.push(whole);
      await requestRefund(client, orderId, whole);
      faults.count("a rejected refund superseded by a full one that was rejected too");
      return record;
    }
    const refundClicks = plan.pick([1, 2, 3]);
    if (refundClicks > 1) faults.count("refund requested several times at once");
    const refundAnswers = await Promise.all(
      Array.from({ length: refundClicks }, (_, i) =>
        client.mutate<{ status: string }>(
          "refunds.create",
          { orderId, refundNo: refund.refundNo, amountCents },
          { loseFirstAnswer: i === 0 && plan.chance(0.2) },
        ),
      ),
    );
    collect(refundAnswers, refund.statuses, refund.refusals, (v) => v.status);
    if (plan.chance(0.25)) {
      // Once MockPay has a refund notification too, send everything again newest first.
      await sleep(500);
      await providerAdmin(client, tradePath, "REORDER");
      faults.count("notifications re-sent newest first (out of order)");
    }
  } catch (error) {
    record.gaveUp = String(error);
  }
  return record;
}

/** Waits for the order to ship, then returns one unit of its first line ("Return one …" on the order page). */
async function returnOneItem(
  client: ChaosClient,
  orderId: string,
  record: ShopperRecord,
  faults: Faults,
  later: Rng,
) {
  const status = await waitForStatus(client, orderId, (s) => s !== "PAID", faults);
  const line = record.items[0];
  if (status !== "SHIPPED" || !line) return;
  const lines = [{ skuId: line.skuId, quantity: 1 }];
  const refund = {
    refundNo: later.key("return"),
    amountCents: 0,
    statuses: [] as string[],
    refusals: [] as string[],
    lines,
  };
  record.refunds.push(refund);
  const clicks = later.pick([1, 2]);
  const answers = await Promise.all(
    Array.from({ length: clicks }, () =>
      client.mutate<{ status: string; amountCents: number }>("refunds.create", {
        orderId,
        refundNo: refund.refundNo,
        lines,
      }),
    ),
  );
  // What a line is refunded at is the server's to say (what it was paid).
  refund.amountCents = firstValue(answers)?.amountCents ?? 0;
  collect(answers, refund.statuses, refund.refusals, (v) => v.status);
  faults.count("a shipped item returned (refunded once the operator has it back)");
}

/**
 * A line refund MockPay rejects once, asked for while the order is paid and about to ship (or shipped: then a
 * return). The operator's Retry comes a second later, usually after the shipment: a refund of goods that
 * shipped meanwhile becomes a return, received by the operator, then refunded.
 */
async function lineRefundRejectedThenRetried(
  client: ChaosClient,
  orderId: string,
  tradePath: string,
  record: ShopperRecord,
  faults: Faults,
  newer: Rng,
) {
  const line = record.items[0];
  if (!line) return;
  await providerAdmin(client, tradePath, "REJECT_REFUNDS", 1);
  const lines = [{ skuId: line.skuId, quantity: 1 }];
  const refund = {
    refundNo: newer.key("line-refund"),
    amountCents: 0,
    statuses: [] as string[],
    refusals: [] as string[],
    lines,
  };
  record.refunds.push(refund);
  const answer = await client.mutate<{ status: string; amountCents: number }>("refunds.create", {
    orderId,
    refundNo: refund.refundNo,
    lines,
  });
  refund.amountCents = answer.ok ? answer.value.amountCents : 0;
  collect([answer], refund.statuses, refund.refusals, (v) => v.status);
  faults.count("a line refund rejected by MockPay, retried by the operator (after shipping: a return)");
}

/**
 * The shopper pays at MockPay while the success is held back and a late `payment.closed` closes the payment
 * here; then presses Cancel at the moment MockPay sends the success. Two worlds only: the cancel wins (the order
 * closed, the money refunded as a late payment's) or the success does (the order paid, the cancel refused).
 * False when the close never landed first (the story did not happen; the shopper goes on).
 */
async function cancelAsCrossedSuccessArrives(
  client: ChaosClient,
  db: Db,
  orderId: string,
  payment: { outTradeNo: string; payUrl: string },
  record: ShopperRecord,
  faults: Faults,
): Promise<boolean> {
  const tradePath = `/provider/api/admin/trades/${encodeURIComponent(payment.outTradeNo)}`;
  await providerAdmin(client, tradePath, "DROP_ON");
  const confirmed = await client.httpAnswer(
    `/provider/api/trades/${encodeURIComponent(payment.outTradeNo)}/confirm`,
    confirmForm(payment.payUrl),
    [303, 410],
  );
  if (confirmed.status === 410) return false;
  record.paid = true;
  await providerAdmin(client, tradePath, "DELAY");
  await providerAdmin(client, tradePath, "DROP_OFF");
  await providerAdmin(client, tradePath, "CLOSED_AFTER_SUCCESS");
  let closedHere = false;
  for (let attempt = 0; attempt < 40 && !closedHere; attempt++) {
    const [row] = await throughFailover(
      () => db.$client<{ status: string }[]>`
        SELECT status FROM payment_order WHERE out_trade_no = ${payment.outTradeNo}`,
    );
    closedHere = row?.status === "CLOSED";
    if (!closedHere) await sleep(250);
  }
  if (!closedHere) {
    faults.count("cancel × crossed success: the close did not overtake the success");
    return false;
  }
  const [cancel] = await Promise.all([
    client.mutate<{ status: string }>("orders.cancel", { orderId }),
    providerAdmin(client, tradePath, "RESEND"),
  ]);
  const race: NonNullable<ShopperRecord["cancelAfterCrossedClose"]> = {
    answer: cancel.ok ? cancel.value.status : (cancel.error.data.domainCode ?? cancel.error.data.code),
  };
  record.cancelAfterCrossedClose = race;
  race.finalStatus = await waitForStatus(client, orderId, (s) => s === "CLOSED" || PAID.has(s), faults);
  record.lastStatus = race.finalStatus;
  record.paid = race.finalStatus !== "CLOSED";
  faults.count("cancel racing a success whose payment a crossed close had closed here");
  return true;
}

/**
 * A day later, as far as the key is concerned (its record expired): the shopper's browser sends the order's
 * request again. It must be answered with the order it placed, whatever changed since (its last units sold).
 *
 * The day passes in the database only. An app instance's replay cache still holds the key's answer as
 * unexpired (in real time it stops serving it before the key expires), so a copy of the request (a retry
 * after a lost answer) may be answered from a cache while another instance takes the expired key over; if
 * that instance is killed before it stores the outcome, nobody is left to finish the key, as nobody would
 * in real time either once the client has its answer. So, as the browser's next visit would, the request
 * goes again until the record holds an outcome.
 */
async function resendAfterExpiry(client: ChaosClient, db: Db, record: ShopperRecord, faults: Faults) {
  const pg = db.$client;
  const key = () =>
    pg`user_id = ${record.userId} AND biz_type = 'order.create' AND idempotency_key = ${record.requestId}`;
  await throughFailover(
    () => pg`UPDATE idempotency_record SET expires_at = now() - interval '1 second' WHERE ${key()}`,
  );
  const resend = async () => {
    const answer = await client.mutate<{ orderId: string }>("orders.create", {
      requestId: record.requestId,
      items: record.items,
    });
    collect([answer], record.orderIds, record.refusals, (v) => v.orderId);
  };
  await resend();
  for (let round = 0; round < 120; round++) {
    const [row] = await throughFailover(
      () => pg<{ status: string; lease_over: boolean | null }[]>`
        SELECT status, locked_until <= now() AS lease_over FROM idempotency_record WHERE ${key()}`,
    );
    if (row?.status !== "PROCESSING") break;
    if (row.lease_over) await resend();
    else await sleep(500);
  }
  record.resentAfterExpiry = true;
  faults.count("an order's request sent again after its key expired");
}

/**
 * The harness's own query, as a person at a console would run it: on a database that is away (a failover cuts
 * every session through HAProxy), again, for up to a minute. It only reads, or writes what is the same written
 * twice.
 */
async function throughFailover<T>(query: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await query();
    } catch (error) {
      if (!isTransientError(error) || attempt >= 120) throw error;
      await sleep(500);
    }
  }
}

/** One refund request, as the order page sends it. */
async function requestRefund(
  client: ChaosClient,
  orderId: string,
  refund: ShopperRecord["refunds"][number],
): Promise<void> {
  const answer = await client.mutate<{ status: string }>("refunds.create", {
    orderId,
    refundNo: refund.refundNo,
    amountCents: refund.amountCents,
  });
  collect([answer], refund.statuses, refund.refusals, (v) => v.status);
}

/**
 * Issue 24's first defect as a story: the shopper pays payment A at MockPay while its success is held back and a
 * late `payment.closed` reaches the merchant first (A closed there); the shopper pays again with payment B; A's
 * success then arrives (A is PAID_LATE, refunded in full); then B is confirmed. If the scarce product ran out
 * meanwhile, the order is refunded automatically too: B's whole amount, beside A's.
 */
async function payLateThenAgain(
  client: ChaosClient,
  orderId: string,
  first: { outTradeNo: string; payUrl: string },
  record: ShopperRecord,
  faults: Faults,
): Promise<boolean> {
  const tradePath = (outTradeNo: string) => `/provider/api/admin/trades/${encodeURIComponent(outTradeNo)}`;
  record.latePayment = { first: first.outTradeNo };
  await providerAdmin(client, tradePath(first.outTradeNo), "DROP_ON");
  const confirmed = await client.httpAnswer(
    `/provider/api/trades/${encodeURIComponent(first.outTradeNo)}/confirm`,
    confirmForm(first.payUrl),
    [303, 410],
  );
  if (confirmed.status === 410) return false;
  // The success waits at MockPay; a close overtakes it.
  await providerAdmin(client, tradePath(first.outTradeNo), "DELAY");
  await providerAdmin(client, tradePath(first.outTradeNo), "DROP_OFF");
  await providerAdmin(client, tradePath(first.outTradeNo), "CLOSED_AFTER_SUCCESS");
  // Pay again: a new payment once the merchant has heard of the close (until then Pay answers the open one).
  let second: { outTradeNo: string; payUrl: string } | undefined;
  for (let attempt = 0; attempt < 40 && !second; attempt++) {
    const answer = await client.mutate<{ outTradeNo: string; payUrl: string }>("payments.create", {
      orderId,
    });
    if (answer.ok && answer.value.outTradeNo !== first.outTradeNo) second = answer.value;
    else await sleep(250);
  }
  // The close never landed before the success was released: the first payment simply paid the order.
  if (!second) {
    faults.count("late payment story: the close did not overtake the success");
    return true;
  }
  record.latePayment.second = second.outTradeNo;
  if ((await openPayPage(client, second.payUrl, faults)) === "expired") return true;
  // The first payment's success arrives now, while the second is open: money for a payment that is not the order's.
  await providerAdmin(client, tradePath(first.outTradeNo), "RESEND");
  const paid = await client.httpAnswer(
    `/provider/api/trades/${encodeURIComponent(second.outTradeNo)}/confirm`,
    confirmForm(second.payUrl),
    [303, 410],
  );
  faults.count("late payment, then paid again (the late one refunded)");
  return paid.status === 303;
}

/** Opens a payment, cancels the order, then presses Confirm on the closed order's pay page. */
async function confirmAfterClose(
  client: ChaosClient,
  orderId: string,
  record: ShopperRecord,
  faults: Faults,
) {
  const pay = await client.mutate<{ outTradeNo: string; payUrl: string }>("payments.create", { orderId });
  if (!pay.ok) return;
  record.outTradeNos.push(pay.value.outTradeNo);
  if ((await openPayPage(client, pay.value.payUrl, faults)) === "expired") return;
  const cancel = await client.mutate<{ status: string }>("orders.cancel", { orderId });
  record.confirmedAfterClose = {
    cancelAnswer: cancel.ok ? cancel.value.status : (cancel.error.data.domainCode ?? cancel.error.data.code),
  };
  await client.http(
    `/provider/api/trades/${encodeURIComponent(pay.value.outTradeNo)}/confirm`,
    confirmForm(pay.value.payUrl),
    303,
  );
  faults.count("Confirm pressed after the order was cancelled");
}

/**
 * Waits for the coupon the paid order earned, then places two new orders with it at once (two
 * intents, two keys), one on each instance: exactly one may get the discount.
 */
async function spendCouponTwice(client: ChaosClient, plan: Rng, record: ShopperRecord, faults: Faults) {
  let code: string | undefined;
  for (let attempt = 0; attempt < 60 && !code; attempt++) {
    const coupons = await client.query<{ code: string; state: string }[]>("coupons.list", undefined);
    code = coupons.ok ? coupons.value.find((c) => c.state === "AVAILABLE")?.code : undefined;
    if (!code) await sleep(250);
  }
  if (!code) return;
  faults.count("one coupon spent by two orders at once, over both instances");
  const requestIds = [plan.key("coupon-a"), plan.key("coupon-b")];
  // Worth more than the coupon, and never short of stock.
  const mugs = [{ skuId: "SKU-MUG", quantity: 2 }];
  const answers = await Promise.all(
    requestIds.map((requestId, instance) =>
      client.mutate<{ orderId: string; discountCents?: number }>(
        "orders.create",
        { requestId, items: mugs, couponCode: code },
        { instance },
      ),
    ),
  );
  record.couponSpend = {
    code,
    requestIds,
    answers: answers.map((a) =>
      a.ok ? `discounted ${a.value.discountCents ?? 0}` : (a.error.data.domainCode ?? a.error.data.code),
    ),
  };
}

/** What the pay page's Confirm button posts: the signed link's fields (an action needs them). */
function confirmForm(payUrl: string): RequestInit {
  return {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URL(payUrl, "http://pay.invalid").searchParams.toString(),
  };
}

/**
 * MockPay's page opens the trade. Next streams pages, so a page that failed can
 * still answer 200 with an error view: like a person, look at it and reload.
 */
async function openPayPage(client: ChaosClient, payUrl: string, faults: Faults): Promise<"open" | "expired"> {
  for (let attempt = 0; attempt < 30; attempt++) {
    const html = await client.http(payUrl, {}, 200);
    if (html.includes('data-testid="trade-status"')) return "open";
    if (html.includes("This payment link has expired")) return "expired";
    faults.count("MockPay's page showed an error (shopper reloads)");
    await sleep(300);
  }
  throw new Error(`MockPay's page never showed the trade: ${payUrl}`);
}

function pickCart(plan: Rng, skuIds: readonly string[]) {
  const lines = plan.pick([1, 1, 2]);
  const chosen = new Set<string>();
  while (chosen.size < lines) chosen.add(plan.pick(skuIds));
  return [...chosen].map((skuId) => ({ skuId, quantity: plan.int(1, 3) }));
}

function collect<T>(
  answers: Answer<T>[],
  into: string[],
  refusals: string[],
  pick: (value: T) => string,
): void {
  for (const answer of answers) {
    if (answer.ok) into.push(pick(answer.value));
    else refusals.push(answer.error.data.domainCode ?? answer.error.data.code);
  }
}

async function providerAdmin(
  client: ChaosClient,
  tradePath: string,
  action: string,
  count = 5,
): Promise<void> {
  await client.http(
    tradePath,
    {
      method: "POST",
      headers: {
        authorization: `Bearer ${CHAOS_ADMIN_TOKEN}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ action, count: String(count) }).toString(),
    },
    303,
  );
}

/** Watches the order page until the status matches; after a while presses "Check payment status". */
async function waitForStatus(
  client: ChaosClient,
  orderId: string,
  done: (status: string) => boolean,
  faults: Faults,
): Promise<string | undefined> {
  const started = Date.now();
  let asked = false;
  let status: string | undefined;
  while (Date.now() - started < 60_000) {
    const order = await client.query<{ status: string }>("orders.get", { orderId });
    status = order.ok ? order.value.status : status;
    if (status && done(status)) return status;
    if (!asked && Date.now() - started > 6_000) {
      asked = true;
      faults.count("shopper pressed Check payment status");
      await client.mutate("payments.checkStatus", { orderId });
    }
    await sleep(250);
  }
  return status;
}
