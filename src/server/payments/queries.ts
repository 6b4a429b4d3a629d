import { and, asc, desc, eq, inArray } from "drizzle-orm";
import type { Executor } from "../db/client";
import { orders, paymentNotification, paymentOrder } from "../db/schema";
import { DomainError } from "../errors";

/** An order's payments and every notification received about them, oldest first. */
export async function getPaymentTimeline(db: Executor, userId: string, orderId: string) {
  const [order] = await db
    .select({ id: orders.id })
    .from(orders)
    .where(and(eq(orders.id, orderId), eq(orders.userId, userId)));
  if (!order) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  const payments = await db
    .select({
      outTradeNo: paymentOrder.outTradeNo,
      status: paymentOrder.status,
      amountCents: paymentOrder.amountCents,
      currency: paymentOrder.currency,
      transactionId: paymentOrder.transactionId,
      paidAt: paymentOrder.paidAt,
      createdAt: paymentOrder.createdAt,
    })
    .from(paymentOrder)
    .where(eq(paymentOrder.orderId, orderId))
    .orderBy(desc(paymentOrder.createdAt));
  const outTradeNos = payments.map((p) => p.outTradeNo);
  const notifications = outTradeNos.length
    ? await db
        .select({
          id: paymentNotification.id,
          receivedAt: paymentNotification.receivedAt,
          notificationId: paymentNotification.notificationId,
          deliveryId: paymentNotification.deliveryId,
          type: paymentNotification.type,
          outcome: paymentNotification.outcome,
          detail: paymentNotification.detail,
          alert: paymentNotification.alert,
          httpStatus: paymentNotification.httpStatus,
        })
        .from(paymentNotification)
        .where(inArray(paymentNotification.outTradeNo, outTradeNos))
        .orderBy(asc(paymentNotification.receivedAt), asc(paymentNotification.id))
    : [];
  return { payments, notifications };
}
