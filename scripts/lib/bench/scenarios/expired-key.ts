import { randomUUID } from "node:crypto";
import type { Bench } from "../bench";
import { orderRequest, peakRssMb, sessionCookie, startApp } from "../load";
import { log } from "../settings";

/**
 * 12: a replay must never come from an answer cached before its key expired. An instance with keys
 * that live 2 s answers a key, replays it (now cached), lets it expire and be cleaned up, and is
 * asked again: that request must reach the database (a new record is written for the key) and
 * name the same order (the business key outlives the record).
 */
export async function expiredKey(bench: Bench) {
  const { url, count, rows } = bench;
  log("12. a key that expired and was cleaned up is not answered from the cache");
  // The cleanup is a worker's task: this instance hosts the worker.
  const app = await startApp(url, {
    IDEMPOTENCY_TTL_HOURS: String(2 / 3600),
    IDEMPOTENCY_CLEANUP_INTERVAL_MS: "200",
    WORKER_IN_APP: "true",
  });
  bench.cleanups.unshift(() => app.stop());
  const cookie = await sessionCookie(app.baseUrl);
  const key = randomUUID();
  const request = orderRequest({ kind: "trpc", cookie }, key);
  const send = async () => {
    const response = await fetch(`${app.baseUrl}${request.path}`, {
      method: "POST",
      headers: request.headers,
      body: request.body,
    });
    const body = (await response.json()) as {
      result?: { data: { json: { orderId: string; replayed: boolean } } };
    };
    return body.result?.data.json;
  };
  const records = () =>
    count(`SELECT count(*)::int AS n FROM idempotency_record WHERE idempotency_key = '${key}'`);
  const started = Date.now();
  const first = await send();
  const replays = await Promise.all(Array.from({ length: 5 }, send));
  let cleaned = false;
  while (Date.now() - started < 15_000) {
    if ((await records()) === 0) {
      cleaned = true;
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const after = await send();
  const recorded = await records();
  const sameOrder = [...replays, after].every((answer) => answer?.orderId === first?.orderId);
  rows.push({
    id: "expired-key",
    scenario: "12 replay after the key expired and was cleaned up",
    requestsPerSec: 0,
    p50Ms: 0,
    p99Ms: 0,
    peakRssMb: peakRssMb(app.child),
    correctness: `record cleaned up: ${cleaned}; the next request reached the database: ${recorded === 1}; same order: ${sameOrder}`,
    ok: first !== undefined && cleaned && recorded === 1 && sameOrder,
  });
  await app.stop();
}
