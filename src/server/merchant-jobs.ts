import { getEnv } from "~/env";
import { alertsFrom, opsFigures, RECONCILE_EVERY_MIN, RECONCILE_FULL_EVERY_MIN } from "~/server/admin/alerts";
import { getLogger } from "~/shared/logger";
import { every } from "~/shared/periodic";
import { getAppContext } from "./app-context";
import type { ConsumeHooks } from "./fulfilment/consume";
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
 * How often a worker looks for a reconciliation due (a "Reconcile now", a period's run): a request waits at most
 * this long; a look at a period claimed already costs a delete and two inserts that change nothing.
 */
const RECONCILE_CLAIM_MS = 5_000;

// On globalThis: two copies of this module load in the production server (why: src/host/server.ts).
const globalForJobs = globalThis as unknown as { checkoutJobs?: RunningJobs };

/** The merchant's background work in an app instance. Safe to run in every instance at once. */
export function startMerchantJobs(): void {
  if (globalForJobs.checkoutJobs) return;
  const { db, payments } = getAppContext();
  const log = getLogger();
  const timers: NodeJS.Timeout[] = [];
  const cleanupMs = getEnv().IDEMPOTENCY_CLEANUP_INTERVAL_MS;
  if (cleanupMs > 0) {
    timers.push(
      every(
        cleanupMs,
        async () => {
          const deleted = await deleteExpiredRecords(db);
          if (deleted > 0) log.info({ deleted }, "expired idempotency records deleted");
        },
        { name: "idempotency cleanup", log },
      ),
    );
  }
  // Lost notifications: ask the provider about payments (and refunds) that stayed open too long.
  if (payments.queryIntervalMs > 0) {
    timers.push(
      every(
        payments.queryIntervalMs,
        async () => {
          const results = await syncStalePayments(db, payments, { olderThanS: payments.queryAfterS });
          const changed = results.filter((r) => r.outcome !== "UNCHANGED");
          if (changed.length > 0) log.info({ changed }, "payment status queries applied");
        },
        { name: "payment status query", log },
      ),
    );
  }
  // Unpaid orders past their payment deadline close, through the shopper's cancel path.
  if (payments.timeoutIntervalMs > 0) {
    timers.push(
      every(
        payments.timeoutIntervalMs,
        async () => {
          const { closed, paid, failed } = await closeTimedOutOrders(db, { payments });
          if (closed.length + paid.length + failed.length > 0) {
            log.info({ closed, paid, failed }, "unpaid orders past their deadline");
          }
        },
        { name: "order payment timeout", log },
      ),
    );
  }
  // Notifications refused before verification: counted in memory, written as one row per minute and reason.
  timers.push(
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
  );
  startAlertLog(timers);
  const jobs: RunningJobs = { timers };
  globalForJobs.checkoutJobs = jobs;
  if (getEnv().WORKER_IN_APP) jobs.worker = startEventWorker({ retry: true });
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
        // Once per period and fleet, whichever worker claims it first (the alert log, /admin and /api/metrics read it).
        background: [
          {
            name: "reconciliation",
            everyMs: RECONCILE_CLAIM_MS,
            run: () =>
              reconcileWhenDue(
                getAppContext().db,
                { everyMin: RECONCILE_EVERY_MIN, fullEveryMin: RECONCILE_FULL_EVERY_MIN },
                { paymentTimeoutS: env.ORDER_PAYMENT_TIMEOUT_S },
              ),
          },
        ],
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

/** Conditions a person must see are also written to the log at error level, every 30 s while they hold. */
function startAlertLog(timers: NodeJS.Timeout[]): void {
  const timer = setInterval(() => {
    const { db } = getAppContext();
    lastReconciliation(db)
      .then((report) => opsFigures(db, report))
      .then((figures) => {
        for (const alert of alertsFrom(figures))
          getLogger().error({ alert: alert.name, figures }, `${alert.title}: ${alert.detail}`);
      })
      .catch((err: unknown) => getLogger().warn({ err }, "alert check failed"));
  }, 30_000);
  timer.unref();
  timers.push(timer);
}
