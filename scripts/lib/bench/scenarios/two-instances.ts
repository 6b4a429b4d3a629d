import { randomUUID } from "node:crypto";
import { CpuMeter, processCpuMs } from "../../cpu";
import type { Bench } from "../bench";
import { latencyCurve, orderLoad, peakRssMb, run, sent, startApp } from "../load";
import { CONNECTIONS, log } from "../settings";

/** 6: first executions split across two app processes on one database. */
export async function twoInstances(bench: Bench) {
  const { app, cookie, userId, count, settled, appCpu, rows, cleanups, url } = bench;
  log("9. two instances: first executions split across two app processes");
  const second = await startApp(url);
  cleanups.unshift(() => second.stop());
  const cookie2 = `checkout_session=${decodeURIComponent(cookie.split("=")[1] ?? "")}`;
  const twoKeys = Array.from({ length: 200_000 }, () => randomUUID());
  sent.count = 0;
  const before6 = await count(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
  const twoCpu = new CpuMeter(() => appCpu() + processCpuMs(second.child.pid));
  const [a, b] = await twoCpu.measure(
    () =>
      Promise.all([
        run({
          ...orderLoad(app.baseUrl, { kind: "trpc", cookie }, twoKeys, 0),
          connections: Math.max(1, CONNECTIONS / 2),
        }),
        run({
          ...orderLoad(second.baseUrl, { kind: "trpc", cookie: cookie2 }, twoKeys, 100_000),
          connections: Math.max(1, CONNECTIONS / 2),
        }),
      ]),
    ([x, y]) => x.requests.total + y.requests.total,
  );
  const after6 = await settled(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
  rows.push({
    id: "two-instances",
    scenario: "9 two instances",
    requestsPerSec: Math.round(a.requests.average + b.requests.average),
    ...twoCpu.perRequest(),
    p50Ms: Math.max(a.latency.p50, b.latency.p50),
    p99Ms: Math.max(a.latency.p99, b.latency.p99),
    latency: latencyCurve(a),
    peakRssMb: Math.max(peakRssMb(app.child) ?? 0, peakRssMb(second.child) ?? 0),
    correctness: `${after6 - before6} orders for ${a["2xx"] + b["2xx"]} answered / ${sent.count} sent`,
    ok:
      after6 - before6 >= a["2xx"] + b["2xx"] && after6 - before6 <= sent.count && a.non2xx + b.non2xx === 0,
  });
}
