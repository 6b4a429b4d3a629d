import { randomUUID } from "node:crypto";
import type { Bench } from "../bench";
import { orderLoad, orderRequest, run } from "../load";
import { KEEP_ALIVE, log } from "../settings";

/**
 * 11: many idle-ish keep-alive connections at once: each sends one replay a second, so the app
 * holds them all open; every request must be answered 2xx, none may error or time out.
 */
export async function keepAlive(bench: Bench) {
  const { app, cookie, meter, total, add } = bench;
  log(`11. ${KEEP_ALIVE} concurrent keep-alive connections, one replay a second each`);
  const key = randomUUID();
  const transport = { kind: "trpc", cookie } as const;
  const request = orderRequest(transport, key);
  const first = await fetch(`${app.baseUrl}${request.path}`, {
    method: "POST",
    headers: request.headers,
    body: request.body,
  });
  if (!first.ok) throw new Error(`the keep-alive scenario's first order answered ${first.status}`);
  const cpu = meter();
  const result = await cpu.measure(
    () =>
      run({
        ...orderLoad(app.baseUrl, transport, [key], 0, null),
        connections: KEEP_ALIVE,
        connectionRate: 1,
        duration: 6,
        timeout: 20,
      }),
    total,
  );
  add(
    "keep-alive",
    `11 ${KEEP_ALIVE} keep-alive connections`,
    result,
    `${result["2xx"]} answered 2xx of ${result.requests.total}, ${result.errors} errors, ${result.timeouts} timeouts`,
    result.errors === 0 && result.timeouts === 0 && result["2xx"] === result.requests.total,
    cpu,
  );
}
