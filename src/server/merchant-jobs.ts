import { getEnv } from "~/env";
import { alertsFrom, opsFigures, RECONCILE_EVERY_MIN, RECONCILE_FULL_EVERY_MIN } from "~/server/admin/alerts";
import { getLogger } from "~/shared/logger";
import { every } from "~/shared/periodic";
import { getAppContext } from "./app-context";
import type { ConsumeHooks } from "./fulfilment/consume";
import type { PeriodicTask } from "./fulfilment/periodic-task";
import { type RunningWorker, startWorker } from "./fulfilment/worker";
import { deleteExpiredRecords } from "./operations";
import { closeTimedOutOrders } from "./orders/timeout";
import { syncStalePayments } from "./payments/status-query";
import { lastReconciliation, reconcileWhenDue } from "./reconciliation/reconcile";

interface RunningJobs {
  timers: NodeJS.Timeout[];
  worker?: Promise<RunningWorker | undefined>;
}

const REFUSAL_FLUSH_MS = 2_000;
/**
 * A run of a short task (the cleanup's batches, the status query, the payment timeout, the alert log) not settled
 * after this is given up on and the next one starts: one hung on a connection a failover left open must not hold
 * up the closing of unpaid orders for the worker's default five minutes.
 */
const SHORT_TASK_DEADLINE_MS = 30_000;
/** Conditions a person must see are also written to the log at error level, this often while they hold. */
const ALERT_LOG_MS = 30_000;
/**
 * How often a worker looks for a reconciliation due (a "Reconcile now", a period's run): a request waits at most
 * this long; a look at a period claimed already costs a delete and two inserts that change nothing.
 */
const RECONCILE_CLAIM_MS = 5_000;

// On globalThis: two copies of this module load in the production server (why: src/host/server.ts).
const globalForJobs = globalThis as unknown as { checkoutJobs?: RunningJobs };

/**
 * What an app instance runs beside its requests: the flush of the notification refusals it counted (its own, in
 * memory), and the event worker with the periodic tasks when it hosts them (WORKER_IN_APP, the demo's `npm start`).
 * In production (`npm run serve` beside `npm run worker`) the periodic tasks run in the worker processes only, so
 * an instance's CPU is its requests'. Safe to run in every instance at once.
 */
export function startMerchantJobs(): void {
  if (globalForJobs.checkoutJobs) return;
  const { db, payments } = getAppContext();
  const log = getLogger();
  // Notifications refused before verification: counted in memory, written as one row per minute and reason.
  const timers = [
    every(
      REFUSAL_FLUSH_MS,
      async () => {
        const written = await payments.refusals.flush(db);
        if (Object.keys(written).length > 0) {
          log.warn(
            { refused: written },
            "notifications refused before verification (unsigned, forged or stale)",
          );
        }
      },
      { name: "refused notification counts", log },
    ),
  ];
  const jobs: RunningJobs = { timers };
  globalForJobs.checkoutJobs = jobs;
  if (getEnv().WORKER_IN_APP) jobs.worker = startEventWorker({ retry: true });
}

/**
 * The periodic tasks, run by every event worker (each safe in several at once): the reconciliation (once per
 * period and fleet, whichever worker claims it first), the deletion of expired keys, the status query of payments
 * whose notifications were lost, the close of unpaid orders past their deadline, and the alert log.
 */
function periodicTasks(): PeriodicTask[] {
  const env = getEnv();
  const { db, payments } = getAppContext();
  const log = getLogger();
  const tasks: PeriodicTask[] = [
    {
      name: "reconciliation",
      everyMs: RECONCILE_CLAIM_MS,
      run: () =>
        reconcileWhenDue(
          db,
          { everyMin: RECONCILE_EVERY_MIN, fullEveryMin: RECONCILE_FULL_EVERY_MIN },
          { paymentTimeoutS: env.ORDER_PAYMENT_TIMEOUT_S },
        ),
    },
    {
      name: "alert log",
      deadlineMs: SHORT_TASK_DEADLINE_MS,
      everyMs: ALERT_LOG_MS,
      run: async () => {
        const figures = await opsFigures(db, await lastReconciliation(db));
        for (const alert of alertsFrom(figures))
          log.error({ alert: alert.name, figures }, `${alert.title}: ${alert.detail}`);
      },
    },
  ];
  if (env.IDEMPOTENCY_CLEANUP_INTERVAL_MS > 0)
    tasks.push({
      name: "idempotency cleanup",
      deadlineMs: SHORT_TASK_DEADLINE_MS,
      everyMs: env.IDEMPOTENCY_CLEANUP_INTERVAL_MS,
      run: async () => {
        const deleted = await deleteExpiredRecords(db);
        if (deleted > 0) log.info({ deleted }, "expired idempotency records deleted");
      },
    });
  // Lost notifications: ask the provider about payments (and refunds) that stayed open too long.
  if (payments.queryIntervalMs > 0)
    tasks.push({
      name: "payment status query",
      deadlineMs: SHORT_TASK_DEADLINE_MS,
      everyMs: payments.queryIntervalMs,
      run: async () => {
        const results = await syncStalePayments(db, payments, { olderThanS: payments.queryAfterS });
        const changed = results.filter((r) => r.outcome !== "UNCHANGED");
        if (changed.length > 0) log.info({ changed }, "payment status queries applied");
      },
    });
  // Unpaid orders past their payment deadline close, through the shopper's cancel path.
  if (payments.timeoutIntervalMs > 0)
    tasks.push({
      name: "order payment timeout",
      deadlineMs: SHORT_TASK_DEADLINE_MS,
      everyMs: payments.timeoutIntervalMs,
      run: async () => {
        const { closed, paid, failed } = await closeTimedOutOrders(db, { payments });
        if (closed.length + paid.length + failed.length > 0)
          log.info({ closed, paid, failed }, "unpaid orders past their deadline");
      },
    });
  return tasks;
}

/** Stops the timers and lets the event worker finish its running jobs (graceful shutdown). */
export async function stopMerchantJobs(): Promise<void> {
  const jobs = globalForJobs.checkoutJobs;
  if (!jobs) return;
  globalForJobs.checkoutJobs = undefined;
  for (const timer of jobs.timers) clearInterval(timer);
  const { db, payments } = getAppContext();
  await payments.refusals.flush(db).catch(() => {});
  await getAppContext()
    .telemetry.attempts?.flush()
    .catch(() => {});
  await (await jobs.worker)?.stop();
}

/**
 * Outbox relay and idempotent consumers, in this process (WORKER_IN_APP) or via `npm run worker`.
 * `retry`: keep trying to start while the database is away (an app instance must not come up without
 * its worker for good); the worker script exits instead and is restarted by whoever runs it.
 */
export async function startEventWorker({
  retry = false,
  onGiveUp,
}: {
  retry?: boolean;
  /** What to do when the worker stays stuck after new job runners (the worker script exits; see startWorker). */
  onGiveUp?: (reason: string) => void;
} = {}) {
  const env = getEnv();
  for (let attempt = 0; ; attempt++) {
    try {
      return await startWorker(getAppContext().db, {
        connectionString: env.databaseUrl,
        concurrency: env.WORKER_CONCURRENCY,
        relayIntervalMs: env.OUTBOX_RELAY_INTERVAL_MS,
        refunds: { ...getAppContext().payments, intervalMs: 1_000 },
        log: getLogger(),
        observer: getAppContext().telemetry.observer,
        heartbeatMs: env.WORKER_HEARTBEAT_MS,
        stallMs: env.WORKER_STALL_MS,
        onGiveUp,
        background: periodicTasks(),
        hooks:
          env.FAULT_CONSUMER_CRASH_RATE > 0 ? crashAfterCommit(env.FAULT_CONSUMER_CRASH_RATE) : undefined,
      });
    } catch (err) {
      getLogger().error({ err, attempt }, "the event worker could not start");
      if (!retry || !globalForJobs.checkoutJobs) return undefined;
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** attempt, 5_000)));
    }
  }
}

/** Fault injection for the chaos run: die the hard way between a consumer's commit and the queue's ack. */
function crashAfterCommit(rate: number): ConsumeHooks {
  return {
    afterCommit: (event, consumer, outcome) => {
      if (outcome === "DUPLICATE" || Math.random() >= rate) return;
      getLogger().warn(
        { eventId: event.id, consumer },
        "fault injection: killing the worker after the commit",
      );
      process.kill(process.pid, "SIGKILL");
    },
  };
}
