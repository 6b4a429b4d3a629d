import pino from "pino";
import { getEnv } from "~/env";
import type { MockPayContext } from "~/mockpay/server/context";
import { mockPayDbOver } from "~/mockpay/server/db";
import type { AppContext } from "~/server/app-context";
import type { Db } from "~/server/db/client";
import { createGateway, DEFAULT_GATEWAY_CONFIG } from "~/server/gateway/gateway";
import { createTelemetry } from "~/server/observability/observer";
import { RefusalTally } from "~/server/payments/refused-notifications";
import { REFUNDS_PORT } from "~/server/refunds/facts";

export const TEST_WEBHOOK_SECRET = "whsec_test_secret_0123456789";
export const TEST_APP_ID = "app_test";

/** The app's dependencies as a test wires them: no environment involved. */
export function testAppContext(db: Db, baseUrl = "http://127.0.0.1:1"): AppContext {
  return {
    db,
    // Batches as the app's defaults make them (IDEMPOTENCY_BATCH_SIZE, IDEMPOTENCY_BATCH_RUNNERS).
    idempotency: { ttlMs: 60_000, leaseMs: 10_000, waitMs: 5_000, batch: { maxSize: 8, runners: 2 } },
    sessionSecret: "test-secret-test-secret",
    sessionSecretsAccepted: ["test-secret-test-secret"],
    apiTokenTtlS: 86_400,
    apiTokensEnabled: true,
    adminToken: getEnv().ADMIN_TOKEN,
    benchRoutes: false,
    gateway: createGateway(db, { ...DEFAULT_GATEWAY_CONFIG, enabled: false }),
    telemetry: createTelemetry(pino({ level: "silent" })),
    payments: {
      appId: TEST_APP_ID,
      webhookSecret: TEST_WEBHOOK_SECRET,
      baseUrl,
      toleranceS: 300,
      providerBaseUrl: baseUrl,
      queryAfterS: 30,
      paymentTimeoutS: 900,
      timeoutIntervalMs: 0,
      queryIntervalMs: 0,
      refusals: new RefusalTally(),
      refunds: REFUNDS_PORT,
    },
  };
}

/** MockPay's dependencies as a test wires them: its own handle over the test's pool, the same secret. */
export function testMockPay(db: Db): MockPayContext {
  return {
    db: mockPayDbOver(db.$client),
    appId: TEST_APP_ID,
    webhookSecret: TEST_WEBHOOK_SECRET,
    delivery: { webhookSecret: TEST_WEBHOOK_SECRET, timeScale: 0.001, sendDuplicates: true },
    pollMs: 0,
    adminToken: getEnv().ADMIN_TOKEN,
  };
}
