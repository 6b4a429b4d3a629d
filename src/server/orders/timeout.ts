import { and, asc, eq, lt, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { orders } from "~/server/db/schema";
import { isDomainError } from "~/server/errors";
import { runOperation } from "~/server/operations";
import type { CloseDeps } from "~/server/payments/close-payments";
import { cancelOrderOperation } from "./cancel-order";

export interface TimeoutOutcome {
  /** Closed now (their open payments closed at the provider first). */
  closed: string[];
  /** Paid at the last moment: the provider refused to close, and the order followed its payment. */
  paid: string[];
  /** Not settled this round (the provider away, …): tried again next round. */
  failed: string[];
}

/**
 * Closes orders still unpaid `paymentTimeoutS` after they were placed, through the same path as a
 * shopper's cancel (`order.cancel`), so the race with a late Confirm ends in one world too. Safe to
 * run in every instance at once: the cancel is idempotent by the order.
 */
export async function closeTimedOutOrders(
  db: Db,
  deps: { payments: CloseDeps & { paymentTimeoutS: number } },
  limit = 20,
): Promise<TimeoutOutcome> {
  const due = await db
    .select({ orderId: orders.id, userId: orders.userId })
    .from(orders)
    .where(
      and(
        eq(orders.status, "PENDING_PAYMENT"),
        lt(orders.createdAt, sql`now() - ${deps.payments.paymentTimeoutS} * interval '1 second'`),
      ),
    )
    .orderBy(asc(orders.createdAt))
    .limit(limit);
  const outcome: TimeoutOutcome = { closed: [], paid: [], failed: [] };
  for (const { orderId, userId } of due) {
    try {
      await runOperation(db, cancelOrderOperation, { userId, input: { orderId }, deps });
      outcome.closed.push(orderId);
    } catch (error) {
      if (isDomainError(error, "ORDER_NOT_CANCELLABLE")) outcome.paid.push(orderId);
      else outcome.failed.push(orderId);
    }
  }
  return outcome;
}
