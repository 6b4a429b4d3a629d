import { randomUUID } from "node:crypto";
import { DEFAULT_IDEMPOTENCY_CONFIG } from "~/server/operations";
import { createOrder } from "~/server/orders/create-order";
import { CpuMeter, ownCpuMs } from "../../cpu";
import type { Bench } from "../bench";
import { latencyCurveOf } from "../load";
import { CONNECTIONS, DURATION, log } from "../settings";

/** 7: the same idempotent transaction straight through postgres.js, no HTTP. */
export async function databaseFloor(bench: Bench) {
  const { db, count, rows } = bench;
  log("10. the same idempotent transaction straight through postgres.js, no HTTP");
  const floorEnd = Date.now() + DURATION * 1000;
  let floorDone = 0;
  const floorLatencies: number[] = [];
  const floorUser = randomUUID();
  // The app side here is this process: the same createOrder, without HTTP.
  const floorCpu = new CpuMeter(ownCpuMs, null);
  await floorCpu.measure(
    () =>
      Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          while (Date.now() < floorEnd) {
            const t0 = performance.now();
            await createOrder(
              db,
              floorUser,
              { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] },
              {
                idempotency: DEFAULT_IDEMPOTENCY_CONFIG,
              },
            );
            floorLatencies.push(performance.now() - t0);
            floorDone++;
          }
        }),
      ),
    () => floorDone,
  );
  floorLatencies.sort((x, y) => x - y);
  const floorOrders = await count(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${floorUser}'`);
  rows.push({
    id: "no-http",
    scenario: "10 the idempotent transaction without HTTP",
    requestsPerSec: Math.round(floorDone / DURATION),
    ...floorCpu.perRequest(),
    p50Ms: Math.round(floorLatencies[Math.floor(floorLatencies.length * 0.5)] ?? 0),
    p99Ms: Math.round(floorLatencies[Math.floor(floorLatencies.length * 0.99)] ?? 0),
    latency: latencyCurveOf(floorLatencies),
    peakRssMb: Math.round(process.memoryUsage().rss / 1024 / 1024),
    correctness: `${floorOrders} orders for ${floorDone} calls`,
    ok: floorOrders === floorDone,
  });
}
