import { RateLimiterDrizzle, RateLimiterRes } from "rate-limiter-flexible";
import type { Db } from "../db/client";
import { rateLimit } from "../db/schema";
import { DomainError } from "../errors";

export interface GatewayConfig {
  enabled: boolean;
  /** Requests per shopper and route in `rateWindowS` (distinct operations). */
  ratePoints: number;
  rateWindowS: number;
  /** Copies of one (shopper, route, key) allowed in `duplicateWindowS`: a double click and backoff retries pass. */
  duplicatePoints: number;
  duplicateWindowS: number;
}

export const DEFAULT_GATEWAY_CONFIG: GatewayConfig = {
  enabled: true,
  ratePoints: 30,
  rateWindowS: 10,
  duplicatePoints: 5,
  duplicateWindowS: 1,
};

export interface GatewayRequest {
  userId: string;
  /** The operation (`order.create`, …), the same for tRPC and REST: one budget per shopper and operation. */
  route: string;
  key?: string;
}

export interface Gateway {
  /** Throws RATE_LIMITED (retryable, with a Retry-After) when the request should be turned away. */
  admit(request: GatewayRequest): Promise<void>;
}

/**
 * The gateway layer: absorbs bursts before they reach the idempotency core.
 * Counters live in PostgreSQL (rate-limiter-flexible's Drizzle store), shared
 * by every app instance. It is an optimisation, never the authority: when its
 * store fails, requests pass and the core still decides.
 */
export function createGateway(
  db: Db,
  config: GatewayConfig,
  onStoreError: (err: unknown) => void = () => {},
  onReject: (route: string) => void = () => {},
): Gateway {
  if (!config.enabled) return { admit: async () => {} };
  const duplicates = new RateLimiterDrizzle({
    storeClient: db,
    schema: rateLimit,
    keyPrefix: "dup",
    points: config.duplicatePoints,
    duration: config.duplicateWindowS,
  });
  const rate = new RateLimiterDrizzle({
    storeClient: db,
    schema: rateLimit,
    keyPrefix: "rate",
    points: config.ratePoints,
    duration: config.rateWindowS,
  });
  return {
    async admit({ userId, route, key }) {
      try {
        // Copies of one key are counted first, so a storm of one request never uses up the
        // shopper's budget for a second, different one.
        if (key) await duplicates.consume(`${userId}:${route}:${key}`);
        await rate.consume(`${userId}:${route}`);
      } catch (error) {
        if (!(error instanceof RateLimiterRes)) {
          onStoreError(error);
          return;
        }
        onReject(route);
        throw new DomainError("RATE_LIMITED", "Too many requests; retry shortly with the same key.", {
          retryable: true,
          retryAfterMs: Math.max(error.msBeforeNext, 100),
        });
      }
    },
  };
}
