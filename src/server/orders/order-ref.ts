import { and, eq, type SQL } from "drizzle-orm";
import type { PgColumn } from "drizzle-orm/pg-core";

/**
 * An order as every shopper-owned row names it: its shopper and its id. The shopper is the
 * future distribution column (docs/scale-out.md), so a statement that names both is answered by
 * one shard, and by the (user_id, …) keys on one server.
 */
export interface OrderRef {
  userId: string;
  orderId: string;
}

/** `user_id = … AND <order column> = …` for a table keyed by (user_id, order). */
export function isOrder(table: { userId: PgColumn }, orderColumn: PgColumn, order: OrderRef): SQL {
  return and(eq(table.userId, order.userId), eq(orderColumn, order.orderId)) as SQL;
}
