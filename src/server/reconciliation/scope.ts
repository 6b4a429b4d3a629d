import { type SQL, sql } from "drizzle-orm";
import type { Db, Tx } from "~/server/db/client";

/**
 * Which orders a reconciliation checks: every one (a full run), or a list (an incremental run: the orders
 * touched since the last run, and those the last report named). A check written for one order at a time
 * puts `scope.orders(…)` on the order it reads first, so an incremental run reads each table by its
 * (user_id, order_id) index, only for the orders in the list.
 */
export interface Scope {
  /** True for the orders checked: a condition on an order's key. */
  orders(userId: SQL, orderId: SQL): SQL;
  /** The same, on an outbox event's `aggregate_id` (an order's id as text). */
  events(userId: SQL, aggregateId: SQL): SQL;
}

export interface OrderKey {
  userId: string;
  orderId: string;
}

export const EVERY_ORDER: Scope = { orders: () => sql`TRUE`, events: () => sql`TRUE` };

/**
 * Only the orders in the table `reconcile_scope` of this transaction (`withScopeTable`), which the planner then
 * knows the number of: each query reads every table by its (user_id, order_id) index, for those orders only.
 */
export const SCOPE_TABLE: Scope = {
  orders: (userId, orderId) =>
    sql`(${userId}, ${orderId}) IN (SELECT user_id, order_id FROM reconcile_scope)`,
  events: (userId, aggregateId) =>
    sql`(${userId}, ${aggregateId}) IN (SELECT user_id, order_id::text FROM reconcile_scope)`,
};

/** Runs `work` in one transaction (one snapshot) that holds `keys` in the temporary table `reconcile_scope`. */
export function withScopeTable<T>(
  db: Db,
  keys: readonly OrderKey[],
  work: (tx: Tx) => Promise<T>,
): Promise<T> {
  const list = JSON.stringify(keys.map((k) => ({ u: k.userId, o: k.orderId })));
  return db.transaction(
    async (tx) => {
      await tx.execute(sql`
        CREATE TEMP TABLE reconcile_scope (user_id text, order_id uuid, PRIMARY KEY (user_id, order_id)) ON COMMIT DROP`);
      await tx.execute(sql`
        INSERT INTO reconcile_scope SELECT DISTINCT u, o FROM json_to_recordset(${list}::json) AS t(u text, o uuid)`);
      await tx.execute(sql`ANALYZE reconcile_scope`);
      await tx.execute(sql`SET LOCAL jit = off`);
      return work(tx);
    },
    { isolationLevel: "repeatable read" },
  );
}

/**
 * The orders whose money or goods moved at or after `since`: those the merchant's tables touched (each
 * appends to order_touch in a trigger, drizzle/0034), and those whose trade or refund changed at the provider
 * (which the merchant may never have heard of).
 */
export async function ordersTouchedSince(db: Db, since: Date): Promise<OrderKey[]> {
  const at = since.toISOString();
  const rows = await db.$client<{ user_id: string; order_id: string }[]>`
    SELECT user_id, order_id FROM order_touch WHERE at >= ${at}::timestamptz
     UNION
    SELECT p.user_id, p.order_id FROM provider_trade t JOIN payment_order p ON p.out_trade_no = t.out_trade_no
     WHERE t.updated_at >= ${at}::timestamptz
     UNION
    SELECT p.user_id, p.order_id FROM provider_refund pr
      JOIN provider_trade t ON t.id = pr.trade_id JOIN payment_order p ON p.out_trade_no = t.out_trade_no
     WHERE pr.updated_at >= ${at}::timestamptz`;
  return rows.map((row) => ({ userId: row.user_id, orderId: row.order_id }));
}
