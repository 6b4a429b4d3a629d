import { and, eq, inArray, ne, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { getOwnedOrder, isOrder } from "~/server/db/order-ref";
import { orders, paymentOrder, refundOrder } from "~/server/db/schema";
import {
  type NotificationBody,
  type TradeStatus,
  tradeQueryPath,
  tradeStatusSchema,
} from "~/shared/provider-contract";
import { applyProviderFact } from "./notification-apply";
import type { NotifyDeps } from "./notification-receive";
import { recordReceived } from "./notification-timeline";
import { getFromProvider, type ProviderClientDeps } from "./provider-client";
import type { RefundsPort } from "./refunds-port";

export interface StatusQueryDeps extends NotifyDeps, ProviderClientDeps {}

export interface SyncResult {
  outTradeNo: string;
  providerStatus: TradeStatus["status"];
  outcome: string;
}

/**
 * Notifications can be lost for good: ask the provider, and apply its answer
 * through the same conditional transitions as a notification, so a query that
 * races a late notification still pays the order once.
 */
export async function syncPaymentStatus(
  db: Db,
  outTradeNo: string,
  deps: StatusQueryDeps,
): Promise<SyncResult> {
  await db
    .update(paymentOrder)
    .set({ lastQueriedAt: sql`now()` })
    .where(eq(paymentOrder.outTradeNo, outTradeNo));
  const status = await queryProvider(outTradeNo, deps);
  const facts: NotificationBody[] = [];
  if (status.status === "PAID" || status.status === "CLOSED") {
    facts.push({
      id: `query:${outTradeNo}:${status.status}`,
      type: status.status === "PAID" ? "payment.succeeded" : "payment.closed",
      app_id: status.app_id,
      out_trade_no: outTradeNo,
      transaction_id: status.transaction_id,
      amount_cents: status.amount_cents ?? -1,
      currency: status.currency ?? "",
      created_at: new Date().toISOString(),
    });
  }
  // Refunds the provider decided whose notification we have not (yet) applied: a success for any refund
  // not yet known to have succeeded here, a failure after acceptance for one still awaiting its outcome.
  const known = await db
    .select({ providerRefundNo: refundOrder.providerRefundNo, status: refundOrder.status })
    .from(refundOrder)
    .innerJoin(
      paymentOrder,
      and(eq(paymentOrder.userId, refundOrder.userId), eq(paymentOrder.id, refundOrder.paymentId)),
    )
    .where(and(eq(paymentOrder.outTradeNo, outTradeNo), ne(refundOrder.status, "REFUND_SUCCESS")));
  const statusOf = new Map(known.map((r) => [r.providerRefundNo, r.status]));
  for (const refund of status.refunds) {
    const merchant = statusOf.get(refund.refund_no);
    const awaited = merchant === "REFUND_CREATED" || merchant === "REFUND_PROCESSING";
    if (!merchant || (refund.status === "FAILED" && !awaited)) continue;
    facts.push({
      id: `query:${outTradeNo}:refund:${refund.refund_no}:${refund.attempt}`,
      type: refund.status === "SUCCEEDED" ? "refund.succeeded" : "refund.failed",
      app_id: status.app_id,
      out_trade_no: outTradeNo,
      transaction_id: status.transaction_id,
      refund_no: refund.refund_no,
      refund_attempt: refund.attempt,
      amount_cents: refund.amount_cents,
      currency: refund.currency,
      created_at: new Date().toISOString(),
    });
  }
  if (facts.length === 0) return { outTradeNo, providerStatus: status.status, outcome: "UNCHANGED" };
  const outcomes: string[] = [];
  for (const fact of facts)
    outcomes.push((await applyFactFromProvider(db, "query", fact, deps.refunds)).outcome);
  return { outTradeNo, providerStatus: status.status, outcome: outcomes.join(",") };
}

/**
 * A fact the merchant learnt by asking the provider (a status query, the answer to a close),
 * applied through the same conditional transitions as a notification, and kept in the payment's timeline.
 */
export function applyFactFromProvider(
  db: Db,
  via: "query" | "close",
  fact: NotificationBody,
  refunds: RefundsPort,
) {
  return db.transaction(async (tx) => {
    const applied = await applyProviderFact(tx, fact, refunds);
    await recordReceived(
      tx,
      {
        deliveryId: null,
        notificationId: fact.id,
        outTradeNo: fact.out_trade_no,
        type: `${via}:${fact.type}`,
      },
      applied,
    );
    return applied;
  });
}

function queryProvider(outTradeNo: string, deps: StatusQueryDeps): Promise<TradeStatus> {
  return getFromProvider(deps, tradeQueryPath(deps.appId, outTradeNo), tradeStatusSchema);
}

/** Backoff for a PENDING payment that stays pending: after, 2×, 4×, … of PAYMENT_QUERY_AFTER_S, at most an hour. */
const MAX_QUERY_WAIT_S = 3600;

/**
 * The background job. Every PENDING payment has its own schedule: first asked
 * `olderThanS` after it was made, then after twice as long each time nothing changed
 * (up to an hour), until it is no longer PENDING. The least-asked due payments go
 * first, so a new payment whose notifications were lost is found on time however
 * many abandoned ones wait. Also asked, each at most once per `olderThanS`: payments
 * with a refund open that long (its notification may be lost too), and each closed
 * payment once after closing (a late close can overtake a delayed success).
 */
export async function syncStalePayments(
  db: Db,
  deps: StatusQueryDeps,
  options: { olderThanS: number; limit?: number },
): Promise<SyncResult[]> {
  const after = options.olderThanS;
  const due = await db.execute<{ out_trade_no: string }>(sql`
    UPDATE payment_order
       SET last_queried_at = now(),
           next_query_at = now() + least(${after} * power(2, query_attempts), ${MAX_QUERY_WAIT_S}) * interval '1 second',
           query_attempts = query_attempts + 1
     WHERE id IN (SELECT id FROM payment_order
                   WHERE (status = 'PENDING'
                          AND coalesce(next_query_at, created_at + ${after} * interval '1 second') <= now())
                      OR (((status = 'CLOSED' AND (last_queried_at IS NULL OR last_queried_at < updated_at)
                                              AND updated_at < now() - ${after} * interval '1 second')
                           -- a close is confirmed with the provider once: notifications can cross
                           OR EXISTS (SELECT 1 FROM refund_order r
                                       WHERE r.payment_id = payment_order.id
                                         AND r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING')
                                         AND r.updated_at < now() - ${after} * interval '1 second'))
                          AND (last_queried_at IS NULL OR last_queried_at < now() - ${after} * interval '1 second'))
                   ORDER BY query_attempts, coalesce(next_query_at, created_at + ${after} * interval '1 second')
                   LIMIT ${options.limit ?? 20}
                   FOR UPDATE SKIP LOCKED)
    RETURNING out_trade_no`);
  const results: SyncResult[] = [];
  for (const row of due) results.push(await syncPaymentStatus(db, row.out_trade_no, deps));
  return results;
}

/** Status queries running in this process, per payment: callers at the same moment share one. */
const inFlight = new Map<string, Promise<SyncResult | undefined>>();

/**
 * The order page's "Check payment status" button. Concurrent checks of one payment
 * are coalesced: in this process they share one query, and across instances a
 * payment asked about in the last second is not asked again (the conditional
 * update on `last_queried_at` decides). However many calls a client sends at once,
 * the provider hears one question per payment per second.
 */
export async function checkOrderPayment(db: Db, userId: string, orderId: string, deps: StatusQueryDeps) {
  await getOwnedOrder(db, userId, orderId);
  const pending = await db
    .select({ outTradeNo: paymentOrder.outTradeNo })
    .from(paymentOrder)
    .where(
      and(
        isOrder(paymentOrder, paymentOrder.orderId, { userId, orderId }),
        inArray(paymentOrder.status, ["PENDING"]),
      ),
    );
  const results: SyncResult[] = [];
  for (const { outTradeNo } of pending) {
    let query = inFlight.get(outTradeNo);
    if (!query) {
      query = askUnlessJustAsked(db, outTradeNo, deps).finally(() => inFlight.delete(outTradeNo));
      inFlight.set(outTradeNo, query);
    }
    const result = await query;
    if (result) results.push(result);
  }
  const [after] = await db
    .select({ status: orders.status })
    .from(orders)
    .where(isOrder(orders, orders.id, { userId, orderId }));
  return { orderStatus: after?.status ?? "PENDING_PAYMENT", checked: results };
}

async function askUnlessJustAsked(db: Db, outTradeNo: string, deps: StatusQueryDeps) {
  const [claimed] = await db
    .update(paymentOrder)
    .set({ lastQueriedAt: sql`now()` })
    .where(
      and(
        eq(paymentOrder.outTradeNo, outTradeNo),
        sql`(${paymentOrder.lastQueriedAt} IS NULL OR ${paymentOrder.lastQueriedAt} < now() - interval '1 second')`,
      ),
    )
    .returning({ outTradeNo: paymentOrder.outTradeNo });
  return claimed ? syncPaymentStatus(db, outTradeNo, deps) : undefined;
}
