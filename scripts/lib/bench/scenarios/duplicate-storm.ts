import { randomUUID } from "node:crypto";
import type { Bench } from "../bench";
import { latencyCurveOf, peakRssMb } from "../load";
import { log, STORM } from "../settings";

/** 4: many concurrent copies of one key: one order, one answer, no 409. */
export async function duplicateStorm(bench: Bench) {
  const { app, cookie, count, meter, rows } = bench;
  log(`7. duplicate storm: ${STORM} concurrent copies of one key`);
  const stormKey = randomUUID();
  const started = Date.now();
  const latencies: number[] = [];
  const stormCpu = meter();
  const answers = await stormCpu.measure(
    () =>
      Promise.all(
        Array.from({ length: STORM }, async () => {
          const t0 = performance.now();
          const res = await fetch(`${app.baseUrl}/api/trpc/orders.create`, {
            method: "POST",
            headers: { "content-type": "application/json", cookie },
            body: JSON.stringify({
              json: { requestId: stormKey, items: [{ skuId: "SKU-MUG", quantity: 1 }] },
            }),
          });
          const body = (await res.json()) as { result?: { data: { json: { orderId: string } } } };
          latencies.push(performance.now() - t0);
          return { status: res.status, orderId: body.result?.data.json.orderId };
        }),
      ),
    () => STORM,
  );
  const stormSeconds = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const ids = new Set(answers.flatMap((a) => (a.orderId ? [a.orderId] : [])));
  const stormOrders = await count(`SELECT count(*)::int AS n FROM orders WHERE request_id = '${stormKey}'`);
  const conflicts = answers.filter((a) => a.status === 409).length;
  rows.push({
    id: "storm",
    scenario: `7 duplicate storm (${STORM})`,
    requestsPerSec: Math.round(STORM / stormSeconds),
    ...stormCpu.perRequest(),
    p50Ms: Math.round(latencies[Math.floor(latencies.length * 0.5)] ?? 0),
    p99Ms: Math.round(latencies[Math.floor(latencies.length * 0.99)] ?? 0),
    latency: latencyCurveOf(latencies),
    peakRssMb: peakRssMb(app.child),
    correctness: `${stormOrders} order, ${ids.size} distinct answer(s), ${conflicts} × 409`,
    ok: stormOrders === 1 && ids.size === 1 && answers.every((a) => a.status === 200 || a.status === 409),
  });
}
