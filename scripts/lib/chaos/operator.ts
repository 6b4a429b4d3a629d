import type { Db } from "~/server/db/client";
import { sleep } from "./client";
import { CHAOS_ADMIN_TOKEN, type Cluster } from "./cluster";
import type { Faults } from "./report";

/**
 * A person at /admin: every second, presses Retry on each refund the provider rejected
 * (`POST /api/admin/refunds/{provider refund no}/retry`), and Received on each return whose goods
 * arrived (asked for at least a second ago: the parcel takes its time), on either instance. Returns a stop.
 */
export function startOperator(db: Db, cluster: Cluster, faults: Faults): () => Promise<void> {
  let stopped = false;
  let turn = 0;
  const heard = new Set<string>();
  const loop = (async () => {
    while (!stopped) {
      try {
        const waiting = await db.$client<{ provider_refund_no: string; action: string }[]>`
          SELECT provider_refund_no, 'refunds/' AS action FROM refund_order WHERE status = 'REFUND_FAILED'
          UNION ALL
          SELECT provider_refund_no, 'returns/' FROM refund_order
           WHERE status = 'REFUND_AWAITING_GOODS' AND created_at < now() - interval '1 second'`;
        for (const { provider_refund_no, action } of waiting) {
          const button = action === "returns/" ? "received" : "retry";
          const response = await fetch(
            `${cluster.url(turn++)}/api/admin/${action}${encodeURIComponent(provider_refund_no)}/${button}`,
            {
              method: "POST",
              headers: { authorization: `Bearer ${CHAOS_ADMIN_TOKEN}` },
              redirect: "manual",
              signal: AbortSignal.timeout(10_000),
            },
          );
          await response.text();
          if (response.status === 303) {
            faults.count(
              button === "retry"
                ? "operator pressed Retry on a rejected refund"
                : "operator received a return's goods",
            );
          }
          // What /admin said (a refusal is a message there, not an error page): once per refund and answer.
          const said = `${response.status} ${new URL(response.headers.get("location") ?? "/", "http://x").searchParams.get("message") ?? ""}`;
          if (!heard.has(`${provider_refund_no} ${said}`)) {
            heard.add(`${provider_refund_no} ${said}`);
            console.log(`[chaos] operator: ${button} on ${provider_refund_no} answered ${said}`);
          }
        }
      } catch {
        // An instance down or the database away: look again in a second, as a person would.
      }
      await sleep(1_000);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}
