import { entriesOf, getEnv } from "~/env";
import { createMockPayDb, type MockPayDb } from "./db";
import { type DeliveryDeps, RETRY_SCHEDULES } from "./delivery";

/**
 * MockPay's composition root: its own pool, its own settings. It shares with the
 * merchant only the webhook secret and the HTTP contract, as a real provider would.
 */
export interface MockPayContext {
  db: MockPayDb;
  appId: string;
  webhookSecret: string;
  delivery: DeliveryDeps;
  /** How often the delivery worker looks for due notifications (0: off). */
  pollMs: number;
  /** The operator's token (ADMIN_TOKEN), for MockPay's admin page and its fault buttons. */
  adminToken: string;
}

const globalForMockPay = globalThis as unknown as { mockPay?: MockPayContext };

/** Opened on first use; on globalThis for the reason in src/host/server.ts (two module copies). */
export function getMockPayContext(): MockPayContext {
  if (globalForMockPay.mockPay) return globalForMockPay.mockPay;
  const env = getEnv();
  const context: MockPayContext = {
    db: createMockPayDb(env.databaseUrl, { max: 4, statementTimeoutMs: env.DB_STATEMENT_TIMEOUT_MS }),
    appId: env.PROVIDER_APP_ID,
    webhookSecret: env.PROVIDER_WEBHOOK_SECRET,
    delivery: {
      webhookSecret: env.PROVIDER_WEBHOOK_SECRET,
      timeScale: env.PROVIDER_TIME_SCALE,
      sendDuplicates: env.PROVIDER_SEND_DUPLICATES,
      schedule: RETRY_SCHEDULES[env.PROVIDER_RETRY_SCHEDULE],
      endpoints: {
        mode: env.MOCKPAY_WEBHOOK_FORMAT,
        firstSecret: entriesOf(env.PROVIDER_STANDARD_WEBHOOK_SECRETS)[0],
      },
    },
    pollMs: env.PROVIDER_DELIVERY_POLL_MS,
    adminToken: env.ADMIN_TOKEN,
  };
  globalForMockPay.mockPay = context;
  return context;
}
