import { collectDefaultMetrics } from "prom-client";
import { entriesOf, getEnv } from "~/env";
import { REFUNDS_PORT } from "~/server/refunds/facts";
import { getLogger } from "~/shared/logger";
import { createDb, type Db } from "./db/client";
import { createGateway, type Gateway } from "./gateway/gateway";
import { AttemptLog } from "./observability/attempt-log";
import { createTelemetry, type Telemetry } from "./observability/observer";
import type { AppIdempotencyConfig } from "./observability/request-observer";
import { DEFAULT_REPLAY_CACHE_OPTIONS, ReplayCache } from "./operations";
import type { PaymentDeps } from "./payments/create-payment";
import { RefusalTally } from "./payments/refused-notifications";
import type { StatusQueryDeps } from "./payments/status-query";

/**
 * The composition root of the running app: the one place that turns settings
 * into the dependencies services take as arguments. Opened on first use, so
 * `next build` needs no database.
 */
export interface AppContext {
  db: Db;
  /** The idempotency core's settings; a transport passes them on per request (`forRequest`). */
  idempotency: AppIdempotencyConfig;
  /** What signs session cookies and API tokens (SESSION_SECRET). */
  sessionSecret: string;
  /** What they are checked against: SESSION_SECRET, then SESSION_SECRET_PREVIOUS's (during a rotation). */
  sessionSecretsAccepted: readonly string[];
  /** How long a REST API token is valid (API_TOKEN_TTL_HOURS). */
  apiTokenTtlS: number;
  /** POST /api/v1/tokens makes tokens (API_TOKENS_ENABLED). */
  apiTokensEnabled: boolean;
  /** The operator's token (ADMIN_TOKEN): /admin, /api/metrics, the admin actions. */
  adminToken: string;
  /** The benchmark's unprotected baseline routes are served (BENCH_ROUTES). */
  benchRoutes: boolean;
  gateway: Gateway;
  telemetry: Telemetry;
  payments: PaymentDeps &
    StatusQueryDeps & {
      queryAfterS: number;
      queryIntervalMs: number;
      timeoutIntervalMs: number;
      /** Notifications refused before verification, counted here and flushed by the jobs. */
      refusals: RefusalTally;
    };
}

const globalForApp = globalThis as unknown as { checkoutApp?: AppContext };

export function getAppContext(): AppContext {
  if (globalForApp.checkoutApp) return globalForApp.checkoutApp;
  const env = getEnv();
  const db = createDb(env.databaseUrl, {
    max: env.DB_POOL_MAX,
    statementTimeoutMs: env.DB_STATEMENT_TIMEOUT_MS,
    idleInTransactionTimeoutMs: env.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
  });
  const telemetry = createTelemetry(getLogger(), new AttemptLog(db));
  // This process's runtime beside the app's counters: event-loop delay, GC pauses, heap, CPU (prom-client's).
  collectDefaultMetrics({ register: telemetry.registry });
  const app: AppContext = {
    db,
    gateway: createGateway(
      db,
      {
        enabled: env.GATEWAY_ENABLED,
        ratePoints: env.GATEWAY_RATE_POINTS,
        rateWindowS: env.GATEWAY_RATE_WINDOW_S,
        duplicatePoints: env.GATEWAY_DUPLICATE_POINTS,
        duplicateWindowS: env.GATEWAY_DUPLICATE_WINDOW_S,
        identityPoints: env.GATEWAY_IDENTITY_POINTS,
        clientWritePoints: env.GATEWAY_CLIENT_WRITE_POINTS,
        redisUrl: env.REDIS_URL,
      },
      (err) => getLogger().warn({ err }, "gateway store failed; letting the request through"),
      (rejection) => telemetry.observer.gatewayRejected(rejection),
    ),
    telemetry,
    idempotency: {
      ttlMs: env.IDEMPOTENCY_TTL_HOURS * 60 * 60 * 1000,
      leaseMs: env.IDEMPOTENCY_LEASE_MS,
      waitMs: env.IDEMPOTENCY_WAIT_MS,
      observe: telemetry.observer.idempotency,
      ...(env.IDEMPOTENCY_BATCH_SIZE > 1
        ? { batch: { maxSize: env.IDEMPOTENCY_BATCH_SIZE, runners: env.IDEMPOTENCY_BATCH_RUNNERS } }
        : {}),
      ...(env.IDEMPOTENCY_CACHE_ENTRIES > 0
        ? {
            cache: new ReplayCache({
              ...DEFAULT_REPLAY_CACHE_OPTIONS,
              maxEntries: env.IDEMPOTENCY_CACHE_ENTRIES,
            }),
          }
        : {}),
    },
    sessionSecret: env.SESSION_SECRET,
    sessionSecretsAccepted: [env.SESSION_SECRET, ...env.sessionSecretsPrevious],
    apiTokenTtlS: Math.round(env.API_TOKEN_TTL_HOURS * 3600),
    apiTokensEnabled: env.API_TOKENS_ENABLED,
    adminToken: env.ADMIN_TOKEN,
    benchRoutes: env.BENCH_ROUTES,
    payments: {
      appId: env.PROVIDER_APP_ID,
      webhookSecret: env.PROVIDER_WEBHOOK_SECRET,
      standardWebhooks: {
        secrets: entriesOf(env.PROVIDER_STANDARD_WEBHOOK_SECRETS),
        publicKeys: entriesOf(env.PROVIDER_STANDARD_WEBHOOK_PUBLIC_KEYS),
      },
      baseUrl: env.appBaseUrl,
      toleranceS: env.PAYMENT_TIMESTAMP_TOLERANCE_S,
      providerBaseUrl: env.providerBaseUrl,
      queryAfterS: env.PAYMENT_QUERY_AFTER_S,
      paymentTimeoutS: env.ORDER_PAYMENT_TIMEOUT_S,
      timeoutIntervalMs: env.ORDER_TIMEOUT_INTERVAL_MS,
      queryIntervalMs: env.PAYMENT_QUERY_INTERVAL_MS,
      observer: telemetry.observer,
      refusals: new RefusalTally(),
      refunds: REFUNDS_PORT,
    },
  };
  globalForApp.checkoutApp = app;
  return app;
}
