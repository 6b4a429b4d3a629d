import { randomUUID } from "node:crypto";
import type { IdempotencyConfig } from "@exactly-once/idempotency";
import type postgres from "postgres";
import { closeDb, createDb, type Db, pgClient } from "~/server/db/client";
import { CATALOGUE } from "~/server/db/seed";
import { handleConsumeJob } from "~/server/fulfilment/worker";
import { createOrder } from "~/server/orders/create-order";
import type { OrderLine } from "~/server/orders/schema";
import { createPayment } from "~/server/payments/create-payment";
import { handlePaymentNotification, type NotifyDeps } from "~/server/payments/notification-receive";
import type { ProviderClientDeps } from "~/server/payments/provider-client";
import { applyFactFromProvider } from "~/server/payments/status-query";
import { reconcile } from "~/server/reconciliation/reconcile";
import { REFUNDS_PORT } from "~/server/refunds/facts";
import { receiveReturn } from "~/server/refunds/returns";
import { submitRefund } from "~/server/refunds/submit";
import { type NotificationBody, SIGNATURE_HEADER, signBody } from "~/shared/provider-contract";
import { type Gate, startGate } from "./gate";

/**
 * What the actors of a pair run against: the harness's database (its own, migrated and seeded), the app's
 * dependencies with a provider that answers as each schedule's script says (signed, as MockPay signs), and
 * the helpers that set a story up before a schedule and settle it after, all on a connection the gates do
 * not hold.
 */

export const APP_ID = "app_interleavings";
export const SECRET = "whsec_interleavings_0123456789";

/** What the provider answers, per schedule: a close or a status query per trade, each refund send in turn. */
export interface ProviderScript {
  /** Per out_trade_no: the trade paid at the provider (its transaction id), else it is open (closes as CLOSED). */
  paid: Map<string, string>;
  /** How many of the next refund sends are REJECTED (then they are ACCEPTED). */
  rejectNext: number;
  /** The provider does not answer at all (a refund recorded now stays to be sent). */
  away: boolean;
  /** The provider refund numbers it accepted: each is paid, whatever the merchant recorded of it. */
  accepted: Set<string>;
}

export type Deps = NotifyDeps &
  ProviderClientDeps & {
    baseUrl: string;
    paymentTimeoutS: number;
    refunds: typeof REFUNDS_PORT;
  };

export interface World {
  url: string;
  /** Not gated: set-up, settling, checks. */
  db: Db;
  sql: postgres.Sql;
  deps: Deps;
  script: ProviderScript;
  /** Every copy of a key waits for its holder however long the scheduler keeps it; no batches, no cache. */
  idempotency: IdempotencyConfig;
}

export function createWorld(url: string): World {
  const script: ProviderScript = { paid: new Map(), rejectNext: 0, away: false, accepted: new Set() };
  const deps: Deps = {
    appId: APP_ID,
    webhookSecret: SECRET,
    toleranceS: 300,
    providerBaseUrl: "http://provider.invalid",
    baseUrl: "http://merchant.invalid",
    paymentTimeoutS: 900,
    refunds: REFUNDS_PORT,
    fetchFn: scriptedProvider(script),
  };
  return {
    url,
    db: createDb(url, { max: 6 }),
    sql: pgClient(url, { max: 2, onnotice: () => {} }),
    deps,
    script,
    idempotency: { ttlMs: 86_400_000, leaseMs: 60_000, waitMs: 60_000 },
  };
}

export async function closeWorld(world: World) {
  await closeDb(world.db);
  await world.sql.end();
}

/** A connection pool of one actor, through its own gate, opened and warmed while the gate is open. */
export async function actorPool(world: World, connections: number): Promise<{ gate: Gate; db: Db }> {
  const gate = await startGate(world.url);
  const db = createDb(gate.url, { max: connections });
  // Every connection opened now (its start-up and type queries pass while the gate is open).
  const client = db.$client;
  const held = await Promise.all(Array.from({ length: connections }, () => client.reserve()));
  for (const conn of held) {
    await conn`SELECT 1`;
    conn.release();
  }
  return { gate, db };
}

/** A provider answering as the script says, its answers signed with the shared secret. */
function scriptedProvider(script: ProviderScript): typeof fetch {
  const signed = (kind: "closeAnswer" | "refundAnswer" | "statusAnswer", answer: unknown) => {
    const body = JSON.stringify(answer);
    const signature = signBody(kind, SECRET, body, Math.floor(Date.now() / 1000));
    return new Response(body, { headers: { [SIGNATURE_HEADER]: signature } });
  };
  return async (input, init) => {
    // As fetch fails when nothing listens: the request never left.
    if (script.away) throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
    const url = new URL(String(input));
    if (url.pathname === "/provider/api/closes") {
      const { out_trade_no } = JSON.parse(String(init?.body)) as { out_trade_no: string };
      const transaction = script.paid.get(out_trade_no) ?? null;
      return signed("closeAnswer", {
        out_trade_no,
        status: transaction ? "PAID" : "CLOSED",
        transaction_id: transaction,
      });
    }
    if (url.pathname === "/provider/api/refunds") {
      const { refund_no } = JSON.parse(String(init?.body)) as { refund_no: string };
      if (script.rejectNext > 0) {
        script.rejectNext--;
        return signed("refundAnswer", { refund_no, status: "REJECTED", reason: "risk control" });
      }
      script.accepted.add(refund_no);
      return signed("refundAnswer", { refund_no, status: "ACCEPTED", attempt: 1 });
    }
    if (url.pathname.startsWith("/provider/api/trades/")) {
      const outTradeNo = decodeURIComponent(url.pathname.split("/").pop() ?? "");
      const transaction = script.paid.get(outTradeNo) ?? null;
      return signed("statusAnswer", {
        app_id: APP_ID,
        out_trade_no: outTradeNo,
        status: transaction ? "PAID" : "WAITING",
        transaction_id: transaction,
        amount_cents: null,
        currency: null,
        refunds: [],
      });
    }
    return new Response("not found", { status: 404 });
  };
}

/* ---------------------------------------------------------------- stories, set up without a gate */

export interface PlacedOrder {
  userId: string;
  orderId: string;
  amountCents: number;
  currency: string;
  items: OrderLine[];
}

export interface OpenedPayment {
  outTradeNo: string;
  amountCents: number;
  currency: string;
}

/** Two of one SKU with stock to spare for a batch of stories: a line refund of one unit leaves one. */
export const TWO_MUGS: OrderLine[] = [{ skuId: "SKU-MUG", quantity: 2 }];

export async function placeOrder(world: World, items: OrderLine[] = TWO_MUGS, userId = randomUUID()) {
  const order = await createOrder(
    world.db,
    userId,
    { requestId: randomUUID(), items },
    { idempotency: world.idempotency },
  );
  return { userId, orderId: order.orderId, amountCents: order.amountCents, currency: order.currency, items };
}

export async function openPayment(world: World, order: PlacedOrder): Promise<OpenedPayment> {
  const payment = await createPayment(world.db, order.userId, { orderId: order.orderId }, world.deps);
  return { outTradeNo: payment.outTradeNo, amountCents: payment.amountCents, currency: payment.currency };
}

/** A provider fact about a payment, as a signed delivery (MockPay's own format). */
export function delivery(fact: NotificationBody) {
  const body = JSON.stringify(fact);
  return {
    body,
    signature: signBody("notification", SECRET, body, Math.floor(Date.now() / 1000)),
    deliveryId: randomUUID(),
  };
}

export function paymentFact(
  payment: OpenedPayment,
  type: "payment.succeeded" | "payment.closed",
  transactionId: string | null,
): NotificationBody {
  return {
    id: `evt_${randomUUID()}`,
    type,
    app_id: APP_ID,
    out_trade_no: payment.outTradeNo,
    transaction_id: transactionId,
    amount_cents: payment.amountCents,
    currency: payment.currency,
    created_at: new Date().toISOString(),
  };
}

/** The provider tells the merchant a fact (through the notify handler, on the given database). */
export async function tell(world: World, db: Db, fact: NotificationBody) {
  const answer = await handlePaymentNotification(db, delivery(fact), world.deps);
  if (answer.httpStatus !== 200)
    throw new Error(`the merchant refused ${fact.type}: ${JSON.stringify(answer.body)}`);
  return answer;
}

/** A placed order, its payment opened and paid at the provider (the transaction id scripted) and applied. */
export async function paidOrder(world: World, items: OrderLine[] = TWO_MUGS) {
  const order = await placeOrder(world, items);
  const payment = await openPayment(world, order);
  const transactionId = `T${randomUUID().slice(0, 12)}`;
  world.script.paid.set(payment.outTradeNo, transactionId);
  await tell(world, world.db, paymentFact(payment, "payment.succeeded", transactionId));
  return { ...order, payment, transactionId };
}

/**
 * Runs each consumer of the order's events of `eventType` (all types when absent), as the worker would, until
 * the events they raise are consumed too; `consumers` names the only ones to run. Returns how many ran.
 */
export async function consume(world: World, orderId: string, eventType?: string, consumers?: string[]) {
  const { consumersOf } = await import("~/server/fulfilment/consumers");
  let ran = 0;
  for (let round = 0; round < 10; round++) {
    const events = await world.sql<{ id: string; user_id: string; event_type: string }[]>`
      SELECT id, user_id, event_type FROM outbox_event WHERE aggregate_id = ${orderId} ORDER BY created_at, id`;
    let ranNow = 0;
    for (const event of events) {
      if (eventType && event.event_type !== eventType) continue;
      for (const consumer of consumersOf(event.event_type)) {
        if (consumers && !consumers.includes(consumer.name)) continue;
        const job = { eventId: event.id, userId: event.user_id, consumer: consumer.name };
        if ((await handleConsumeJob(world.db, job)) !== "DUPLICATE") ranNow++;
      }
    }
    ran += ranNow;
    if (ranNow === 0) return ran;
  }
  throw new Error(`the events of order ${orderId} kept raising events for 10 rounds`);
}

/** The id of the order's event of this type (the first). */
export async function eventOf(world: World, orderId: string, eventType: string) {
  const [event] = await world.sql<{ id: string; user_id: string }[]>`
    SELECT id, user_id FROM outbox_event WHERE aggregate_id = ${orderId} AND event_type = ${eventType}
     ORDER BY created_at, id LIMIT 1`;
  if (!event) throw new Error(`order ${orderId} has no ${eventType} event`);
  return { eventId: event.id, userId: event.user_id };
}

export async function refundOf(world: World, refundNo: string) {
  const [refund] = await world.sql<{ provider_refund_no: string; status: string }[]>`
    SELECT provider_refund_no, status FROM refund_order WHERE refund_no = ${refundNo}`;
  if (!refund) throw new Error(`no refund ${refundNo}`);
  return refund;
}

/* ---------------------------------------------------------------- after a schedule */

/**
 * Moves the order's refunds on as the provider and time would, without the gates: each still to send is sent
 * (the provider accepts it), each accepted one succeeds (also one recorded here as rejected: the provider's
 * word is the fact), each return's goods come back. Returns how many moved.
 */
export async function completeRefunds(world: World, orderId: string): Promise<number> {
  world.script.rejectNext = 0;
  const refunds = await world.sql<
    {
      provider_refund_no: string;
      status: string;
      amount_cents: number;
      currency: string;
      out_trade_no: string;
      transaction_id: string | null;
    }[]
  >`
    SELECT r.provider_refund_no, r.status, r.amount_cents::int, r.currency, p.out_trade_no, p.transaction_id
      FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
     WHERE r.order_id = ${orderId}
       AND (r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_AWAITING_GOODS')
            OR (r.status IN ('REFUND_FAILED', 'REFUND_SUPERSEDED')
                AND r.provider_refund_no = ANY(${[...world.script.accepted]}::text[])))`;
  for (const refund of refunds) {
    if (refund.status === "REFUND_CREATED") {
      await submitRefund(world.db, refund.provider_refund_no, world.deps);
    } else if (refund.status === "REFUND_AWAITING_GOODS") {
      await receiveReturn(
        world.db,
        refund.provider_refund_no,
        `scan-${refund.provider_refund_no}`,
        world.deps,
      );
    } else {
      await applyFactFromProvider(
        world.db,
        "query",
        {
          id: `settle:${refund.provider_refund_no}`,
          type: "refund.succeeded",
          app_id: APP_ID,
          out_trade_no: refund.out_trade_no,
          transaction_id: refund.transaction_id,
          refund_no: refund.provider_refund_no,
          refund_attempt: 1,
          amount_cents: refund.amount_cents,
          currency: refund.currency,
          created_at: new Date().toISOString(),
        },
        world.deps.refunds,
      );
    }
  }
  return refunds.length;
}

/** Brings the order to rest: its refunds completed and its events consumed, until nothing moves. */
export async function settleOrder(world: World, orderId: string) {
  for (let round = 0; round < 12; round++) {
    const moved = (await completeRefunds(world, orderId)) + (await consume(world, orderId));
    if (moved === 0) return;
  }
  throw new Error(`order ${orderId} did not come to rest in 12 rounds`);
}

/**
 * Reconciliation's findings, with no lag, per order of `orders`; what names no order of theirs (a SKU's stock,
 * say) under "" (it belongs to all of them).
 */
export async function violationsByOrder(world: World, orders: Set<string>): Promise<Map<string, string[]>> {
  const report = await reconcile(world.db, { lagSeconds: 0, sampleSize: 1000 }, { parallel: 2 });
  const found = new Map<string, string[]>();
  for (const invariant of report.invariants) {
    if (IGNORED.has(invariant.name)) continue;
    for (const violation of invariant.violations) {
      if (IGNORED.has(violation.message)) continue;
      for (const row of violation.rows) {
        const orderId = typeof row.order_id === "string" && orders.has(row.order_id) ? row.order_id : "";
        found.set(orderId, [
          ...(found.get(orderId) ?? []),
          `${invariant.name}: ${violation.message} ${JSON.stringify(row)}`,
        ]);
      }
    }
  }
  return found;
}

/**
 * What a schedule's end may show without anything being wrong: no relay runs here (events are consumed
 * directly), a refund the script rejected awaits a person by design, and the provider is a script (it keeps
 * no trades or refunds to agree with).
 */
const IGNORED = new Set([
  "events-delivered",
  "refund rejected by the provider and not retried",
  "agrees-with-provider",
  "ledger-agrees-with-provider",
]);

/** Empties the shopper tables and puts the catalogue's stock back, so each batch starts from the same shelves. */
export async function clearStories(world: World) {
  await world.sql.unsafe(`
    TRUNCATE orders, order_item, payment_order, payment_notification, outbox_event, message_consume_record,
             stock_deduct_record, benefit_grant, coupon_redemption, shipment, shipment_line, refund_order,
             refund_line, stock_return_record, benefit_reversal, ledger_transfer, return_receipt,
             idempotency_record CASCADE`);
  for (const item of CATALOGUE) {
    await world.sql`UPDATE sku SET stock = ${item.stock}, initial_stock = ${item.stock} WHERE id = ${item.id}`;
  }
}
