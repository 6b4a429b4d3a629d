import { startMockPayJobs, stopMockPayJobs } from "~/mockpay/server/mockpay-jobs";
import { startMerchantJobs, stopMerchantJobs } from "~/server/merchant-jobs";
import { getLogger } from "~/shared/logger";

/**
 * The one place background work starts: Next's instrumentation hook calls this
 * when a server process starts (`next dev`, and the production server, which
 * runs Next inside it). Both parties hosted by this process start theirs: the
 * merchant's (relay, consumers, status queries, cleanup, alerts) and MockPay's
 * (notification delivery). Safe to call again, and in every instance at once.
 */
export function startBackgroundJobs(): void {
  startMerchantJobs();
  startMockPayJobs(getLogger().child({ party: "mockpay" }));
}

/** Stops the timers and lets running jobs finish (the production server's graceful shutdown). */
export async function stopBackgroundJobs(): Promise<void> {
  stopMockPayJobs();
  await stopMerchantJobs();
}
