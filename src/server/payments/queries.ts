import { asc, desc, eq, inArray, ne, or, sql } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import { getOwnedOrder, isOrder, type OrderRef } from "~/server/db/order-ref";
import { paymentNotification, paymentOrder, refusedNotification } from "~/server/db/schema";

/** An order's payments, newest first. The caller has checked the order is the shopper's. */
export function paymentsOfOrder(db: Executor, order: OrderRef) {
  return db
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
    .where(isOrder(paymentOrder, paymentOrder.orderId, order))
    .orderBy(desc(paymentOrder.createdAt));
}

/** An order's payments and every notification received about them, oldest first. */
export async function getPaymentTimeline(db: Executor, userId: string, orderId: string) {
  await getOwnedOrder(db, userId, orderId);
  const payments = await paymentsOfOrder(db, { userId, orderId });
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

/** For operators: notifications that were refused or need a person, newest first, and totals by outcome. */
export async function listNotificationIssues(db: Executor, limit = 50) {
  const issues = await db
    .select({
      id: paymentNotification.id,
      receivedAt: paymentNotification.receivedAt,
      outTradeNo: paymentNotification.outTradeNo,
      type: paymentNotification.type,
      outcome: paymentNotification.outcome,
      detail: paymentNotification.detail,
      alert: paymentNotification.alert,
      httpStatus: paymentNotification.httpStatus,
      deliveryId: paymentNotification.deliveryId,
    })
    .from(paymentNotification)
    .where(or(eq(paymentNotification.alert, true), ne(paymentNotification.httpStatus, 200)))
    .orderBy(desc(paymentNotification.receivedAt), desc(paymentNotification.id))
    .limit(limit);
  const totals = await db
    .select({ outcome: paymentNotification.outcome, count: sql<number>`count(*)::int` })
    .from(paymentNotification)
    .groupBy(paymentNotification.outcome)
    .orderBy(paymentNotification.outcome);
  // Refused before verification: only counted (see refused-notifications.ts), never listed one by one.
  const refused = await db
    .select({
      reason: refusedNotification.reason,
      count: sql<number>`sum(${refusedNotification.count})::int`,
    })
    .from(refusedNotification)
    .where(sql`${refusedNotification.minute} > now() - interval '1 day'`)
    .groupBy(refusedNotification.reason)
    .orderBy(refusedNotification.reason);
  return { issues, totals, refused };
}
