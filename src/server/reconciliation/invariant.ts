import { type SQL, sql } from "drizzle-orm";
import type { Scope } from "./scope";

/**
 * An invariant of the whole system, as reconciliation checks it, and the SQL fragments several share. The
 * invariants are in three files by what they guard: that each effect happened once (./once.ts), that goods
 * are conserved (./goods.ts), and that money is (./money.ts).
 */

export interface ReconcileOptions {
  /** An outbox event unpublished (or a job undone) for longer than this is a violation. */
  lagSeconds?: number;
  /** Rows listed per violation. */
  sampleSize?: number;
  /** ORDER_PAYMENT_TIMEOUT_S: an order unpaid this long (plus the lag) should have been closed. */
  paymentTimeoutS?: number;
}

/** What a check's query is given: the thresholds, and which orders it checks. */
export type CheckOptions = Required<ReconcileOptions> & { scope: Scope };

export interface Check {
  message: string;
  /**
   * Returns the rows that break the rule (none when it holds). A row about an order names it (`user_id`,
   * `order_id`), so that the next incremental run checks that order again.
   */
  query: (o: CheckOptions) => SQL;
  /**
   * The check reads the whole database in every run, incremental or not: it is not about one order (stock per
   * SKU, a stuck record), or it finds what no write touched (an order left unpaid, an event not relayed), and
   * an index keeps it cheap with a million orders.
   */
  whole?: true;
}

export interface Invariant {
  name: string;
  description: string;
  checks: Check[];
}

/** Orders that took money: their OrderPaid was applied. */
export const PAID_STATUSES = sql`('PAID', 'SHIPPED', 'STOCK_SHORT', 'REFUNDED')`;

/** Orders (in scope) whose named consumer finished with the given event type. */
export const consumed = (eventType: string, consumer: string, scope: Scope) => sql`
  SELECT e.user_id, e.aggregate_id::uuid AS order_id, c.result FROM outbox_event e
    JOIN message_consume_record c ON c.user_id = e.user_id AND c.event_id = e.id AND c.consumer_name = ${consumer} AND c.status = 'DONE'
   WHERE e.event_type = ${eventType} AND ${scope.events(sql`e.user_id`, sql`e.aggregate_id`)}`;

/** Per (order, SKU) the order took stock of: deducted less returned. */
export const HELD_STOCK = sql`
  SELECT d.user_id, d.order_id, d.sku_id, (d.quantity - coalesce((SELECT sum(r.quantity) FROM stock_return_record r
                                                        WHERE r.user_id = d.user_id AND r.order_id = d.order_id AND r.sku_id = d.sku_id), 0))::int AS held
    FROM stock_deduct_record d`;

/** The ledger's balances of the payment `p` (in the query): shopper, revenue, payable. */
export const LEDGER_OF_PAYMENT = sql.raw(
  `SELECT ${(["shopper", "revenue", "refunds_payable"] as const)
    .map(
      (account) =>
        `coalesce(sum(CASE WHEN t.to_account = '${account}' THEN t.amount_cents WHEN t.from_account = '${account}' THEN -t.amount_cents END), 0)::bigint AS ${account === "refunds_payable" ? "payable" : account}`,
    )
    .join(", ")}
     FROM ledger_transfer t WHERE t.user_id = p.user_id AND t.payment_id = p.id`,
);

/** The order `o` (in the query) has shipped: what it holds then is goods-conserved's to check. */
export const SHIPPED = sql`EXISTS (SELECT 1 FROM shipment_line sl WHERE sl.user_id = o.user_id AND sl.order_id = o.id)`;

/** The order `o` (in the query) has no refund in flight and none that settled within the lag. */
export const SETTLED = (opts: Required<ReconcileOptions>) => sql`
  NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = o.user_id AND r.order_id = o.id
               AND (r.status IN ('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING')
                    OR r.updated_at > now() - ${opts.lagSeconds} * interval '1 second'))`;
