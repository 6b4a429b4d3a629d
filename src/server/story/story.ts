import { sql } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import type { OrderRef } from "~/server/db/order-ref";
import { DomainError } from "~/server/errors";
import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { createOrderOperation } from "~/server/orders/create-order";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { createRefundOperation } from "~/server/refunds/create-refund";

/**
 * The operations whose keys belong to an order, by their own names (never written out here):
 * test/order-story.test.ts checks that they are every operation the app has.
 */
export const STORY_OPERATIONS = {
  create: createOrderOperation.name,
  cancel: cancelOrderOperation.name,
  pay: createPaymentOperation.name,
  refund: createRefundOperation.name,
} as const;
const OP = STORY_OPERATIONS;

/**
 * How long before its order was made an attempt with one of the order's keys still belongs to its story: copies
 * the gateway turned away before the first one ran (a client held back by a rate limit retries within this).
 */
const ATTEMPTS_BEFORE_ORDER = "1 hour";

/**
 * One or more attempts in one second on one lane, with the same outcome and absorber; `effect`: the one
 * that changed something.
 */
export interface StoryMark {
  at: Date;
  count: number;
  outcome: string;
  what: string;
  effect: boolean;
  /** For copies that changed nothing: what absorbed them (the replay cache, the record, a unique index, …). */
  absorbedBy: string;
}

export type StoryLayer = "client" | "gateway" | "service" | "provider" | "consumer" | "refund";

export interface StoryLane {
  layer: StoryLayer;
  title: string;
  /** In words: how many arrived, how many took effect, what happened to the rest. */
  summary: string;
  marks: StoryMark[];
  /** Every absorber on the lane and how many copies it absorbed, most first. */
  absorbers: { by: string; count: number }[];
}

export interface OrderStory {
  orderId: string;
  lanes: StoryLane[];
  /** Every attempt the layers absorbed (arrived but changed nothing). */
  absorbed: number;
}

type Row = {
  layer: StoryLayer;
  what: string;
  outcome: string;
  at: Date;
  count: number;
  effect: boolean;
  absorbed_by: string;
};

/**
 * What happened to one order, lane by lane, from the rows the layers left: the attempts counted per key
 * (duplicate_attempt), the provider's notifications (payment_notification), the consumers' records and
 * the refunds. Every key that belongs to the order is found through its idempotency records (the order's
 * own, its payments', its refunds') and its request id.
 */
export async function orderStory(db: Executor, order: OrderRef): Promise<OrderStory | undefined> {
  const { userId, orderId } = order;
  const [exists] = await db.execute<{ n: number }>(
    sql`SELECT 1 AS n FROM orders WHERE user_id = ${userId} AND id = ${orderId}`,
  );
  if (!exists) return undefined;
  const rows = await db.execute<Row>(sql`
    WITH o AS (SELECT id, user_id, request_id, created_at FROM orders WHERE user_id = ${userId} AND id = ${orderId}),
    keys AS (
      SELECT o.user_id AS scope, o.request_id AS key, ${OP.create}::text AS biz_type FROM o
      UNION
      -- The natural key of the order's payment and cancel operations.
      SELECT o.user_id, o.id::text, 'order' FROM o
      UNION
      SELECT r.user_id, r.idempotency_key, r.biz_type FROM idempotency_record r, o
       WHERE r.user_id = o.user_id
         AND ((r.biz_type IN (${OP.create}, ${OP.cancel}) AND r.biz_id = o.id::text)
           OR (r.biz_type = ${OP.pay} AND r.biz_id IN (SELECT out_trade_no FROM payment_order WHERE user_id = o.user_id AND order_id = o.id))
           OR (r.biz_type = ${OP.refund} AND r.biz_id IN (SELECT refund_no FROM refund_order WHERE user_id = o.user_id AND order_id = o.id)))
    )
    -- The attempt log is appended (a second may have a row in each of two flushes) and indexed by shopper and
    -- time: the order's attempts are its shopper's since a while before it was made (ATTEMPTS_BEFORE_ORDER).
    SELECT CASE WHEN a.layer = 'service' AND k.biz_type = ${OP.refund} THEN 'refund' ELSE a.layer END AS layer,
           a.subject AS what, a.outcome, a.second AS at, sum(a.count)::int AS count, a.outcome = 'first' AS effect,
           a.absorbed_by
      FROM duplicate_attempt a JOIN keys k ON a.scope = k.scope AND a.key = k.key, o
     WHERE a.layer IN ('gateway', 'service') AND a.scope = o.user_id AND a.second >= o.created_at - ${ATTEMPTS_BEFORE_ORDER}::interval
     GROUP BY 1, 2, 3, 4, 6, 7
    UNION ALL
    -- A notification that changed nothing says why in its detail: the conditional update that matched no row.
    SELECT 'provider', n.type, n.outcome, date_trunc('second', n.received_at), count(*)::int, n.outcome = 'PROCESSED',
           CASE WHEN n.outcome = 'PROCESSED' THEN '' ELSE n.detail END
      FROM payment_notification n JOIN payment_order p ON p.out_trade_no = n.out_trade_no, o
     WHERE p.user_id = o.user_id AND p.order_id = o.id
     GROUP BY 1, 2, 3, 4, 6, 7
    UNION ALL
    SELECT 'consumer', a.subject || ' ← ' || e.event_type, a.outcome, a.second, sum(a.count)::int, a.outcome = 'APPLIED',
           a.absorbed_by
      FROM duplicate_attempt a JOIN outbox_event e ON a.key = e.id::text, o
     WHERE a.layer = 'consumer' AND a.scope = o.user_id AND a.second >= o.created_at - ${ATTEMPTS_BEFORE_ORDER}::interval
       AND e.user_id = o.user_id AND e.aggregate_id = o.id::text
     GROUP BY 1, 2, 3, 4, 6, 7
    ORDER BY at`);
  const marks = (layer: StoryLayer, filter: (row: Row) => boolean = () => true): StoryMark[] =>
    rows
      .filter((row) => row.layer === layer && filter(row))
      .map((row) => ({
        at: new Date(row.at),
        count: row.count,
        outcome: row.outcome,
        what: row.what,
        effect: row.effect,
        absorbedBy: row.effect
          ? ""
          : row.absorbed_by ||
            NOT_ABSORBED[row.outcome] ||
            `${row.outcome} (counted before absorbers were named)`,
      }));
  const total = (list: StoryMark[], filter: (m: StoryMark) => boolean = () => true) =>
    list.filter(filter).reduce((sum, m) => sum + m.count, 0);

  // Every request that carried one of the order's keys, as the client sent it: what the gateway turned
  // away plus what reached the idempotency core.
  const requests = [...marks("gateway"), ...marks("service"), ...marks("refund")].sort(
    (a, b) => a.at.getTime() - b.at.getTime(),
  );
  const gateway = marks("gateway");
  const service = marks("service");
  const provider = marks("provider");
  const consumer = marks("consumer");
  const refund = marks("refund");
  const waited = total(service, (m) => m.outcome === "waited");
  const replayed = total(service, (m) => m.outcome === "replayed");
  const lanes: Omit<StoryLane, "absorbers">[] = [
    {
      layer: "client",
      title: "Client",
      summary: `${total(requests)} request(s) reached the server with this order's keys (a retry or a reload asks again with the same key; a double click is stopped in the browser)`,
      marks: requests,
    },
    {
      layer: "gateway",
      title: "Gateway",
      summary: `turned away ${total(gateway)} cop${total(gateway) === 1 ? "y" : "ies"} (429)`,
      marks: gateway,
    },
    {
      layer: "service",
      title: "Idempotency record",
      summary: `executed ${total(service, (m) => m.outcome === "first")}, replayed ${replayed}, made ${waited} wait, refused ${total(service, (m) => m.outcome === "conflict" || m.outcome === "mismatch")}`,
      marks: service,
    },
    {
      layer: "provider",
      title: "MockPay notifications",
      summary: `${total(provider)} delivered, ${total(provider, (m) => m.effect)} processed, ${total(provider, (m) => m.outcome === "DUPLICATE")} answered as duplicates`,
      marks: provider,
    },
    {
      layer: "consumer",
      title: "Consumers",
      summary: `${total(consumer)} deliveries, ${total(consumer, (m) => m.effect)} applied, ${total(consumer, (m) => m.outcome === "DUPLICATE")} skipped as duplicates`,
      marks: consumer,
    },
    {
      layer: "refund",
      title: "Refunds",
      summary: `${total(refund)} request(s), ${total(refund, (m) => m.effect)} made`,
      marks: refund,
    },
  ];
  const absorbed = lanes
    .filter((lane) => lane.layer !== "client")
    .reduce((sum, lane) => sum + total(lane.marks, (m) => !m.effect), 0);
  return {
    orderId,
    lanes: lanes.map((lane) => ({
      ...lane,
      absorbers: lane.layer === "client" ? [] : absorbersOf(lane.marks),
    })),
    absorbed,
  };
}

/** Outcomes that took no effect without anything absorbing them: what they were instead. */
const NOT_ABSORBED: Record<string, string> = {
  stored_error: "no effect: a business refusal, stored and replayed for the key",
  released: "no effect: it failed, and the key was freed for a retry",
  unavailable: "no effect: the database was unavailable (503)",
};

function absorbersOf(marks: StoryMark[]): { by: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const m of marks) if (!m.effect) counts.set(m.absorbedBy, (counts.get(m.absorbedBy) ?? 0) + m.count);
  return [...counts.entries()].map(([by, count]) => ({ by, count })).sort((a, b) => b.count - a.count);
}

/** The story of one of the shopper's own orders (ORDER_NOT_FOUND for anyone else's). */
export async function ownOrderStory(db: Executor, userId: string, orderId: string): Promise<OrderStory> {
  // Named by its shopper, another shopper's order is no order: the story's own read is the owner check.
  const story = await orderStory(db, { userId, orderId });
  if (!story) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  return story;
}
