import { randomUUID } from "node:crypto";
import type autocannon from "autocannon";
import type { Bench } from "../bench";
import { CREATE_ORDER, combine, orderLoad, run, sent, sessionCookie } from "../load";
import { DURATION, log, ROUNDS, WARMUP } from "../settings";

/** 1 baseline, 2 first execution (interleaved rounds after a warm-up), 3 replay of the same keys. */
export async function orderPaths(bench: Bench) {
  const { db, app, cookie, userId, settled, meter, add, total } = bench;
  // JIT, statement caches and pool connections warm up on a shopper of its own, for both paths alike.
  log(`warm-up: ${WARMUP}s on each path`);
  const warmCookie = await sessionCookie(app.baseUrl);
  for (const procedure of ["/api/bench/trpc/placeOrderUnprotected", CREATE_ORDER]) {
    const warmKeys = Array.from({ length: 50_000 }, () => randomUUID());
    await run({ ...orderLoad(app.baseUrl, warmCookie, warmKeys, 0, procedure), duration: WARMUP });
  }

  // 1 and 2 alternate in short rounds, so drift on a shared machine hits both alike.
  log(`1 + 2. baseline and first execution, ${ROUNDS} interleaved rounds of ${DURATION / ROUNDS}s each`);
  // The baseline has its own shopper, so its orders stay out of the counts below.
  const baselineCookie = await sessionCookie(app.baseUrl);
  const baselineRuns: autocannon.Result[] = [];
  const firstRuns: autocannon.Result[] = [];
  const baselineCpu = meter();
  const firstCpu = meter();
  sent.count = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const slice = { duration: DURATION / ROUNDS };
    const baselineKeys = Array.from({ length: 100_000 }, () => randomUUID());
    baselineRuns.push(
      await baselineCpu.measure(
        () =>
          run({
            ...orderLoad(
              app.baseUrl,
              baselineCookie,
              baselineKeys,
              0,
              "/api/bench/trpc/placeOrderUnprotected",
            ),
            ...slice,
          }),
        total,
      ),
    );
    const firstKeys = Array.from({ length: 100_000 }, () => randomUUID());
    firstRuns.push(
      await firstCpu.measure(() => run({ ...orderLoad(app.baseUrl, cookie, firstKeys), ...slice }), total),
    );
  }
  const baseline = combine(baselineRuns);
  add("1 baseline (no protection)", baseline, `${baseline.non2xx} errors`, true, baselineCpu);
  const first = combine(firstRuns);
  const created = await settled(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
  // autocannon stops with requests in flight: they may commit without being counted, never twice.
  add(
    "2 first execution",
    first,
    `${created} orders for ${first["2xx"]} answered / ${sent.count} sent`,
    created >= first["2xx"] && created <= sent.count,
    firstCpu,
  );

  log("3. replay: the same keys again");
  const replayKeys = (
    await db.$client<{ request_id: string }[]>`SELECT request_id FROM orders WHERE user_id = ${userId}`
  ).map((r) => r.request_id);
  const replayCpu = meter();
  const replay = await replayCpu.measure(() => run(orderLoad(app.baseUrl, cookie, replayKeys)), total);
  const afterReplay = await settled(`SELECT count(*)::int AS n FROM orders WHERE user_id = '${userId}'`);
  add(
    "3 replay",
    replay,
    `${afterReplay - created} new orders (must be 0)`,
    afterReplay === created,
    replayCpu,
  );
}
