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
  /** New identities (guest sessions, API tokens) per client address per minute. */
  identityPoints: number;
  /** Writes per client address and operation in `rateWindowS`, whoever the client says it is. */
  clientWritePoints: number;
  /** Counters in Redis instead of PostgreSQL (REDIS_URL). */
  redisUrl?: string;
}

export const DEFAULT_GATEWAY_CONFIG: GatewayConfig = {
  enabled: true,
  ratePoints: 30,
  rateWindowS: 10,
  duplicatePoints: 5,
  duplicateWindowS: 1,
  identityPoints: 30,
  clientWritePoints: 120,
};

export interface GatewayRequest {
  userId: string;
  /** The operation (`order.create`, …), the same for tRPC and REST: one budget per shopper and operation. */
  route: string;
  key?: string;
}

/**
 * What a client address is about to do, whoever it says it is: make a new identity,
 * or write (`route` names the operation). New identities cost nothing, so limits per
 * shopper alone are defeated by asking for a new one; these are not.
 */
export type ClientRequest =
  | { address: string; action: "identity" }
  | { address: string; action: "write"; route: string };

export interface Gateway {
  /** Throws RATE_LIMITED (retryable, with a Retry-After) when the request should be turned away. */
  admit(request: GatewayRequest): Promise<void>;
  /** The same, per client address (the essay's ip + uri). */
  admitClient(request: ClientRequest): Promise<void>;
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
  onReject: (rejection: { route: string; scope?: string; key?: string; by: string }) => void = () => {},
): Gateway {
  if (!config.enabled) {
    return {
      admit: async () => {},
      admitClient: async () => {},
      ready: async () => {},
      close: async () => {},
    };
  }
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
  const identities = limiter("ip-identity", config.identityPoints, 60);
  const clientWrites = limiter("ip-write", config.clientWritePoints, config.rateWindowS);
  const describeLimit = (limit: RateLimiterAbstract | undefined) =>
    limit === duplicates
      ? `the gateway's duplicate window (429: more than ${config.duplicatePoints} copies of one key in ${config.duplicateWindowS} s)`
      : limit === rate
        ? `the gateway's rate limit (429: more than ${config.ratePoints} requests per shopper and operation in ${config.rateWindowS} s)`
        : "the gateway's per-address limit (429)";
  /** Consumes one point of each limiter in turn; turned away at the first that is spent. */
  const consume = async (
    route: string,
    points: [RateLimiterAbstract, string][],
    request: { scope?: string; key?: string } = {},
  ) => {
    let turnedAwayBy = 0;
    try {
      for (const [limit, key] of points) {
        await limit.consume(key);
        turnedAwayBy++;
      }
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) {
        onStoreError(error);
        return;
      }
      onReject({ route, ...request, by: describeLimit(points[turnedAwayBy]?.[0]) });
      throw new DomainError("RATE_LIMITED", "Too many requests; retry shortly with the same key.", {
        retryable: true,
        retryAfterMs: Math.max(error.msBeforeNext, 100),
      });
    }
  };
  return {
    ready: () =>
      !redis || redis.status === "ready"
        ? Promise.resolve()
        : new Promise((resolve) => redis.once("ready", () => resolve())),
    async close() {
      await redis?.quit().catch(() => redis.disconnect());
    },
    admit: ({ userId, route, key }) =>
      // Copies of one key are counted first, so a storm of one request never uses up the
      // shopper's budget for a second, different one.
      consume(
        route,
        [
          ...(key ? [[duplicates, `${userId}:${route}:${key}`] as [RateLimiterAbstract, string]] : []),
          [rate, `${userId}:${route}`],
        ],
        { scope: userId, ...(key ? { key } : {}) },
      ),
    admitClient: (request) =>
      request.action === "identity"
        ? consume("identity", [[identities, request.address]])
        : consume(request.route, [[clientWrites, `${request.address}:${request.route}`]]),
  };
}
