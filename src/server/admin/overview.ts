import { desc, eq, inArray, sql } from "drizzle-orm";
import { alertsFrom, opsFigures } from "~/server/admin/alerts";
import type { Db } from "~/server/db/client";
import {
  idempotencyRecord,
  messageConsumeRecord,
  orders,
  outboxEvent,
  paymentOrder,
  refundOrder,
} from "~/server/db/schema";
import { listNotificationIssues } from "~/server/payments/queries";
import { lastReconciliation, reconciliationRequested } from "~/server/reconciliation/reconcile";

export type QueueJob = {
  id: string;
  key: string | null;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  run_at: Date;
};

/** Everything the operations page shows, read in one go. */
export async function operationsOverview(db: Db) {
  const [
    recentOrders,
    payments,
    refunds,
    failedRefunds,
    returns,
    events,
    records,
    jobs,
    notifications,
    reconciliation,
    requested,
  ] = await Promise.all([
    db.select().from(orders).orderBy(desc(orders.createdAt)).limit(20),
    db.select().from(paymentOrder).orderBy(desc(paymentOrder.createdAt)).limit(20),
    db.select().from(refundOrder).orderBy(desc(refundOrder.createdAt)).limit(20),
    db
      .select()
      .from(refundOrder)
      .where(eq(refundOrder.status, "REFUND_FAILED"))
      .orderBy(refundOrder.updatedAt),
    db
      .select()
      .from(refundOrder)
      .where(eq(refundOrder.status, "REFUND_AWAITING_GOODS"))
      .orderBy(refundOrder.createdAt)
      .limit(50),
    db.select().from(outboxEvent).orderBy(desc(outboxEvent.createdAt)).limit(30),
    db.select().from(idempotencyRecord).orderBy(desc(idempotencyRecord.updatedAt)).limit(20),
    db.execute<QueueJob>(sql`
      SELECT id::text, key, attempts, max_attempts, last_error, run_at FROM graphile_worker.jobs
       WHERE attempts > 0 ORDER BY attempts DESC, id LIMIT 50`),
    listNotificationIssues(db, 20),
    // The last run kept by the event worker: a page view never reconciles (seconds with a million orders).
    lastReconciliation(db),
    reconciliationRequested(db),
  ]);
  const consumed = events.length
    ? await db
        .select()
        .from(messageConsumeRecord)
        .where(
          inArray(
            messageConsumeRecord.eventId,
            events.map((e) => e.id),
          ),
        )
    : [];
  const figures = await opsFigures(db, reconciliation);
  return {
    figures,
    alerts: alertsFrom(figures),
    orders: recentOrders,
    payments,
    refunds,
    events: events.map((event) => ({ event, consumed: consumed.filter((c) => c.eventId === event.id) })),
    idempotencyRecords: records,
    deadLetters: jobs.filter((job) => job.attempts >= job.max_attempts),
    failedRefunds,
    returns,
    failingJobs: jobs.filter((job) => job.attempts < job.max_attempts),
    notifications,
    /** The last reconciliation kept (null: none yet), and whether a "Reconcile now" waits for a worker. */
    reconciliation,
    reconciliationRequested: requested,
    /** What the last run repaired by itself before it checked. */
    repairs: reconciliation?.repairs ?? [],
  };
}

/** Sends a dead-lettered (or failing) consumer job round again, now, with fresh attempts. */
export async function retryJob(db: Db, jobId: string): Promise<boolean> {
  if (!/^\d{1,18}$/.test(jobId)) return false;
  const rows = await db.execute(sql`
    SELECT id FROM graphile_worker.reschedule_jobs(ARRAY[${jobId}::bigint], run_at := now(), attempts := 0)`);
  return rows.length > 0;
}
