import { getEnv } from "../env";
import { getAppContext } from "./app-context";
import { deleteExpiredRecords } from "./idempotency";
import { getLogger } from "./logger";

const globalForJobs = globalThis as unknown as { checkoutJobs?: NodeJS.Timeout[] };

/** Background work of an app instance. Safe to run in every instance at once. */
export function startBackgroundJobs(): void {
  if (globalForJobs.checkoutJobs) return;
  const interval = getEnv().IDEMPOTENCY_CLEANUP_INTERVAL_MS;
  const timers: NodeJS.Timeout[] = [];
  if (interval > 0) {
    const timer = setInterval(() => {
      deleteExpiredRecords(getAppContext().db)
        .then((deleted) => {
          if (deleted > 0) getLogger().info({ deleted }, "expired idempotency records deleted");
        })
        .catch((err: unknown) => getLogger().warn({ err }, "idempotency cleanup failed; will retry"));
    }, interval);
    timer.unref();
    timers.push(timer);
  }
  globalForJobs.checkoutJobs = timers;
}
