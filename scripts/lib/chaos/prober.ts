import type { AcknowledgedOrder } from "./checks";
import { ChaosClient, GaveUp, sleep } from "./client";
import type { Cluster } from "./cluster";
import type { History } from "./history";
import type { Faults } from "./report";
import { Rng } from "./rng";
import type { WriteLog } from "./write-log";

/**
 * A steady stream of writes through the load balancer for the whole run (`--ha`): `loops` shoppers that
 * each place a one-mug order, cancel it, wait `gapMs`, and go again. Shoppers write in bursts; the prober makes
 * sure every failover meets writes, so its unavailability is measured, and every acknowledged order is a
 * write that a failover must not lose. Returns a stop that resolves with what it placed.
 */
export function startProber(
  cluster: Cluster,
  faults: Faults,
  writes: WriteLog,
  options: { seed: number; loops: number; gapMs: number; history?: History },
): () => Promise<{ orders: AcknowledgedOrder[]; gaveUp: string[] }> {
  let stopped = false;
  const orders: AcknowledgedOrder[] = [];
  const gaveUp: string[] = [];
  const loops = Array.from({ length: options.loops }, async (_, loop) => {
    const rng = Rng.forParticipant(options.seed, 2_000_000 + loop);
    const history = options.history?.for(`prober ${loop}`);
    let client = new ChaosClient(cluster, rng, faults, writes, history);
    for (let n = 0; !stopped; n++) {
      // A new shopper every ten orders: one shopper's writes stay under the gateway's rate limit (429 would
      // read as unavailability). Its first order makes its session (no read first: a prober only writes).
      if (n > 0 && n % 10 === 0) client = new ChaosClient(cluster, rng, faults, writes, history);
      const probe: AcknowledgedOrder = {
        label: `prober ${loop}, order ${n}`,
        session: "",
        requestId: rng.key("probe"),
        items: [{ skuId: "SKU-MUG", quantity: 1 }],
        orderIds: [],
      };
      try {
        const answer = await client.mutate<{ orderId: string }>("orders.create", {
          requestId: probe.requestId,
          items: probe.items,
        });
        if (answer.ok) {
          probe.session = client.session;
          probe.orderIds.push(answer.value.orderId);
          orders.push(probe);
          // Cancelled at once (a write too): nothing is left for the payment timeout to close.
          const cancelled = await client.mutate<{ status: string }>("orders.cancel", {
            orderId: answer.value.orderId,
          });
          if (!cancelled.ok || cancelled.value.status !== "CLOSED") {
            gaveUp.push(`${probe.label}: cancel answered ${JSON.stringify(cancelled).slice(0, 160)}`);
          }
        } else
          gaveUp.push(`${probe.label}: refused ${answer.error.data.domainCode ?? answer.error.data.code}`);
      } catch (error) {
        if (!(error instanceof GaveUp)) throw error;
        gaveUp.push(`${probe.label}: ${error.message}`);
      }
      await sleep(options.gapMs);
    }
  });
  return async () => {
    stopped = true;
    await Promise.all(loops);
    return { orders, gaveUp };
  };
}
