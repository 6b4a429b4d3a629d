import { getEnv } from "../env";
import { createDb, type Db } from "./db/client";
import type { IdempotencyConfig } from "./idempotency";

/**
 * The composition root of the running app: the one place that turns settings
 * into the dependencies services take as arguments. Opened on first use, so
 * `next build` needs no database.
 */
export interface AppContext {
  db: Db;
  idempotency: IdempotencyConfig;
  sessionSecret: string;
  secureCookies: boolean;
}

const globalForApp = globalThis as unknown as { checkoutApp?: AppContext };

export function getAppContext(): AppContext {
  if (globalForApp.checkoutApp) return globalForApp.checkoutApp;
  const env = getEnv();
  const app: AppContext = {
    db: createDb(env.databaseUrl, {
      max: env.DB_POOL_MAX,
      statementTimeoutMs: env.DB_STATEMENT_TIMEOUT_MS,
    }),
    idempotency: {
      ttlMs: env.IDEMPOTENCY_TTL_HOURS * 60 * 60 * 1000,
      leaseMs: env.IDEMPOTENCY_LEASE_MS,
      waitMs: env.IDEMPOTENCY_WAIT_MS,
    },
    sessionSecret: env.SESSION_SECRET,
    secureCookies: false,
  };
  globalForApp.checkoutApp = app;
  return app;
}
