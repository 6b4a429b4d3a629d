import { and, eq, type SQL } from "drizzle-orm";
import type { PgColumn } from "drizzle-orm/pg-core";
import { z } from "zod";
import { DomainError } from "~/server/errors";
import type { Executor } from "./client";
import { orders } from "./schema";

/**
 * The order as every capability refers to it, at the ground floor so that each can (docs/architecture.md,
 * "A direction between capabilities"): its reference (shopper and id), the id as clients send it, and the
 * owner's check. What an order is and does is the orders capability's.
 */

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

/** An order id as a client sends it (tRPC input). */
export const orderIdInput = z.object({ orderId: z.uuid("orderId must be a UUID") });

/** Path parameters of an order's REST routes. */
export const orderIdParams = z.object({ orderId: z.uuid("orderId must be a UUID") });

export const orderColumns = {
  orderId: orders.id,
  status: orders.status,
  amountCents: orders.amountCents,
  discountCents: orders.discountCents,
  currency: orders.currency,
  requestId: orders.requestId,
  createdAt: orders.createdAt,
};

/** The shopper's order, or ORDER_NOT_FOUND (also for another shopper's order). */
export async function getOwnedOrder(db: Executor, userId: string, orderId: string) {
  const [order] = await db
    .select(orderColumns)
    .from(orders)
    .where(isOrder(orders, orders.id, { userId, orderId }));
  if (!order) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  return order;
}
