import { asc, desc, eq } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import { getOwnedOrder, isOrder, orderColumns } from "~/server/db/order-ref";
import { orderItem, orders } from "~/server/db/schema";
import { moneyOf, type OrderMoney, orderLedger } from "~/server/ledger/ledger";

/** Another shopper's order is indistinguishable from one that does not exist. */
export async function getOrderById(db: Executor, userId: string, orderId: string) {
  const order = await getOwnedOrder(db, userId, orderId);
  const items = await db
    .select({
      skuId: orderItem.skuId,
      name: orderItem.skuName,
      quantity: orderItem.quantity,
      unitPriceCents: orderItem.unitPriceCents,
      lineTotalCents: orderItem.lineTotalCents,
    })
    .from(orderItem)
    .where(isOrder(orderItem, orderItem.orderId, { userId, orderId }))
    .orderBy(asc(orderItem.skuId));
  return { ...order, items };
}

export function listOrders(db: Executor, userId: string, limit = 50) {
  return db
    .select(orderColumns)
    .from(orders)
    .where(eq(orders.userId, userId))
    .orderBy(desc(orders.createdAt))
    .limit(limit);
}

/**
 * Any order, for the operator's pages (no owner check: /admin is behind the admin token). By id alone: on one
 * server a scan, sharded a query to every shard (docs/scale-out.md); only an operator asks it.
 */
export async function getOrderForOperator(db: Executor, orderId: string) {
  const [order] = await db
    .select({ ...orderColumns, userId: orders.userId })
    .from(orders)
    .where(eq(orders.id, orderId));
  return order;
}

/** Where the shopper's money for this order is, from the ledger (ORDER_NOT_FOUND for another shopper's order). */
export async function getOrderMoney(db: Executor, userId: string, orderId: string): Promise<OrderMoney> {
  const order = await getOwnedOrder(db, userId, orderId);
  return moneyOf(await orderLedger(db, { userId, orderId }), order.currency);
}
