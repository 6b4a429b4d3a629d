import { type Answer, ChaosClient, firstValue, sleep } from "./client";
import { CHAOS_ADMIN_TOKEN, type Cluster } from "./cluster";
import type { Faults } from "./report";
import { Rng } from "./rng";

/** What one shopper did and what every answer said: the run checks the database against it. */
export interface ShopperRecord {
  index: number;
  userId: string;
  requestId: string;
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
  refunds: { refundNo: string; amountCents: number; statuses: string[]; refusals: string[] }[];
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
}

const PAID = new Set(["PAID", "SHIPPED", "STOCK_SHORT", "REFUNDED"]);
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
  const client = new ChaosClient(ctx.cluster, Rng.forParticipant(ctx.seed, index + 1_000_000), ctx.faults);
  const record: ShopperRecord = {
    index,
    userId: "",
    requestId: plan.key("order"),
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
    const items = pickCart(plan, ctx.skuIds);

    // Order: one, two or three clicks at once; sometimes the first answer is lost after the commit.
    const clicks = plan.pick([1, 1, 1, 2, 2, 3]);
    if (clicks > 1)
      faults.count(clicks === 2 ? "double click on Place order" : "triple click on Place order");
    const loseOrder = plan.chance(0.2);
    const orderAnswers = await Promise.all(
      Array.from({ length: clicks }, (_, i) =>
        client.mutate<{ orderId: string; amountCents: number }>(
          "checkout.createOrder",
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
    await openPayPage(client, payment.payUrl, faults);
    const tradePath = `/provider/api/admin/trades/${encodeURIComponent(payment.outTradeNo)}`;
    if (plan.chance(0.12)) {
      await providerAdmin(client, tradePath, "DROP_ON");
      faults.count("all notifications of a payment lost (merchant must ask MockPay)");
    }
    const confirmClicks = plan.pick([1, 1, 2]);
    if (confirmClicks > 1) faults.count("double click on MockPay's Confirm");
    await Promise.all(
      Array.from({ length: confirmClicks }, () =>
        client.http(
          `/provider/api/trades/${encodeURIComponent(payment.outTradeNo)}/confirm`,
          { method: "POST" },
          303,
        ),
      ),
    );
    record.paid = true;
    const providerFault = plan.pick(PROVIDER_FAULTS);
    if (providerFault) {
      await providerAdmin(client, tradePath, providerFault);
      faults.count(FAULT_NAMES[providerFault] ?? providerFault);
    }

    record.lastStatus = await waitForStatus(client, orderId, (s) => PAID.has(s), faults);
    if (!record.lastStatus || !["PAID", "SHIPPED"].includes(record.lastStatus) || !plan.chance(0.3)) {
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

/**
 * MockPay's page opens the trade. Next streams pages, so a page that failed can
 * still answer 200 with an error view: like a person, look at it and reload.
 */
async function openPayPage(client: ChaosClient, payUrl: string, faults: Faults): Promise<void> {
  for (let attempt = 0; attempt < 30; attempt++) {
    const html = await client.http(payUrl, {}, 200);
    if (html.includes('data-testid="trade-status"')) return;
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

async function providerAdmin(client: ChaosClient, tradePath: string, action: string): Promise<void> {
  await client.http(
    tradePath,
    {
      method: "POST",
      headers: {
        authorization: `Bearer ${CHAOS_ADMIN_TOKEN}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ action, count: "5" }).toString(),
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
