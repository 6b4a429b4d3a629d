import type { Logger } from "pino";
import { every } from "~/shared/periodic";
import { getMockPayContext } from "./context";
import { deliverDueNotifications } from "./delivery";

const globalForJobs = globalThis as unknown as { mockPayJobs?: NodeJS.Timeout[] };

/** MockPay's background work: the delivery worker sends due notifications until merchants acknowledge them. */
export function startMockPayJobs(log: Logger): void {
  if (globalForJobs.mockPayJobs) return;
  const { db, delivery, pollMs } = getMockPayContext();
  const timers: NodeJS.Timeout[] = [];
  if (pollMs > 0) {
    timers.push(
      every(
        pollMs,
        async () => {
          while ((await deliverDueNotifications(db, delivery)) > 0) {
            // keep going while there is work
          }
        },
        { name: "MockPay delivery", log },
      ),
    );
  }
  globalForJobs.mockPayJobs = timers;
}

export function stopMockPayJobs(): void {
  for (const timer of globalForJobs.mockPayJobs ?? []) clearInterval(timer);
  globalForJobs.mockPayJobs = undefined;
}
