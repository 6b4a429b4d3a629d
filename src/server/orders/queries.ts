import { asc, desc, eq } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import { orderItem, orders } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { moneyOf, type OrderMoney, orderLedger } from "~/server/ledger/ledger";
import { isOrder } from "./order-ref";

const orderColumns = {
  orderId: orders.id,
  status: orders.status,
  amountCents: orders.amountCents,
  discountCents: orders.discountCents,
  currency: orders.currency,
  requestId: orders.requestId,
  createdAt: orders.createdAt,
};

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

/** The shopper's order, or ORDER_NOT_FOUND (also for another shopper's order). */
export async function getOwnedOrder(db: Executor, userId: string, orderId: string) {
  const [order] = await db
    .select(orderColumns)
    .from(orders)
    .where(isOrder(orders, orders.id, { userId, orderId }));
  if (!order) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  return order;
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
