import type { IdempotencyConfig, IdempotencyEvent } from "@exactly-once/idempotency";

/** An idempotency observer that also takes the request the call served (its log line names it). */
export type RequestObserver = (event: IdempotencyEvent, requestId?: string) => void;

/** The app's idempotency settings: the core's, with an observer that names the request. */
export type AppIdempotencyConfig = Omit<IdempotencyConfig, "observe"> & { observe?: RequestObserver };

/**
 * The settings for one request: the same, with an observer that names `requestId`. The id is handed over
 * here, not kept in `AsyncLocalStorage`, whose promise hooks run on every promise of the process on Node 20
 * (docs/benchmark.md, "The request id").
 */
export function forRequest(config: AppIdempotencyConfig, requestId: string): IdempotencyConfig {
  const { observe } = config;
  if (!observe) return config;
  return { ...config, observe: (event) => observe(event, requestId) };
}
