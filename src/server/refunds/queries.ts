import { desc, eq } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import { refundOrder } from "~/server/db/schema";
import { getOwnedOrder } from "~/server/orders/queries";

export async function listRefunds(db: Executor, userId: string, orderId: string) {
  await getOwnedOrder(db, userId, orderId);
  return refundsOfOrder(db, orderId);
}

/** An order's refunds, newest first. The caller has checked the order is the shopper's. */
export function refundsOfOrder(db: Executor, orderId: string) {
  return db
    .select({
      refundNo: refundOrder.refundNo,
      amountCents: refundOrder.amountCents,
      currency: refundOrder.currency,
      status: refundOrder.status,
      reason: refundOrder.reason,
      failureReason: refundOrder.failureReason,
      createdAt: refundOrder.createdAt,
    })
    .from(refundOrder)
    .where(eq(refundOrder.orderId, orderId))
    .orderBy(desc(refundOrder.createdAt));
}
