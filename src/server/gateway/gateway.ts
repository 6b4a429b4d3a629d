import { Redis } from "ioredis";
import {
  type RateLimiterAbstract,
  RateLimiterDrizzle,
  RateLimiterRedis,
  RateLimiterRes,
} from "rate-limiter-flexible";
import type { Db } from "~/server/db/client";
import { rateLimit } from "~/server/db/schema";
import { DomainError } from "~/server/errors";

export interface GatewayConfig {
  enabled: boolean;
  /** Requests per shopper and route in `rateWindowS` (distinct operations). */
  ratePoints: number;
  rateWindowS: number;
  /** Copies of one (shopper, route, key) allowed in `duplicateWindowS`: a double click and backoff retries pass. */
  duplicatePoints: number;
  duplicateWindowS: number;
  /** Counters in Redis instead of PostgreSQL (REDIS_URL). */
  redisUrl?: string;
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
  /** Resolves once the store is connected (until then requests pass). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The gateway layer: absorbs bursts before they reach the idempotency core.
 * Counters live in PostgreSQL (rate-limiter-flexible's Drizzle store), or in
 * Redis when REDIS_URL is set, shared by every app instance. It is an optimisation, never the authority: when its
 * store fails, requests pass and the core still decides.
 */
export function createGateway(
  db: Db,
  config: GatewayConfig,
  onStoreError: (err: unknown) => void = () => {},
  onReject: (route: string) => void = () => {},
): Gateway {
  if (!config.enabled) return { admit: async () => {}, ready: async () => {}, close: async () => {} };
  // Fail fast when Redis is away: the request then passes (the gateway is not the authority).
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false })
    : undefined;
  redis?.on("error", onStoreError);
  const limiter = (keyPrefix: string, points: number, duration: number): RateLimiterAbstract =>
    redis
      ? new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration })
      : new RateLimiterDrizzle({ storeClient: db, schema: rateLimit, keyPrefix, points, duration });
  const duplicates = limiter("dup", config.duplicatePoints, config.duplicateWindowS);
  const rate = limiter("rate", config.ratePoints, config.rateWindowS);
  return {
    ready: () =>
      !redis || redis.status === "ready"
        ? Promise.resolve()
        : new Promise((resolve) => redis.once("ready", () => resolve())),
    async close() {
      await redis?.quit().catch(() => redis.disconnect());
    },
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
