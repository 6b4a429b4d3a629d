import { desc } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import { getOwnedOrder, isOrder, type OrderRef } from "~/server/db/order-ref";
import { refundOrder } from "~/server/db/schema";
import { refundLinesOf } from "./create-refund";

export async function listRefunds(db: Executor, userId: string, orderId: string) {
  await getOwnedOrder(db, userId, orderId);
  return refundsOfOrder(db, { userId, orderId });
}

/** An order's refunds, newest first, with the lines each gives back. The caller has checked the order is the shopper's. */
export async function refundsOfOrder(db: Executor, order: OrderRef) {
  const rows = await db
    .select({
      id: refundOrder.id,
      refundNo: refundOrder.refundNo,
      amountCents: refundOrder.amountCents,
      currency: refundOrder.currency,
      status: refundOrder.status,
      reason: refundOrder.reason,
      failureReason: refundOrder.failureReason,
      createdAt: refundOrder.createdAt,
    })
    .from(refundOrder)
    .where(isOrder(refundOrder, refundOrder.orderId, order))
    .orderBy(desc(refundOrder.createdAt));
  const lines = await refundLinesOf(
    db,
    order.userId,
    rows.map((row) => row.id),
  );
  return rows.map(({ id, ...row }) => ({ ...row, lines: lines.get(id) ?? [] }));
}
