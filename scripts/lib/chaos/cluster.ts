import { AppCluster, type AppClusterOptions } from "../app-cluster";

export const CHAOS_ADMIN_TOKEN = "chaos-admin-token-0123456789abcdefghij";
export const CHAOS_WEBHOOK_SECRET = "whsec_chaos_secret_0123456789abcdefgh";
/** The `whsec_` secret MockPay signs with, and the merchant verifies with, in a Standard Webhooks run. */
export const CHAOS_STANDARD_SECRET = "whsec_Y2hhb3Mtc3RhbmRhcmQtd2ViaG9va3Mtc2VjcmV0";
const CHAOS_SESSION_SECRET = "chaos-session-secret-0123456789abcdefghij";

/** How long an order may wait for its payment in the run. */
export const CHAOS_PAYMENT_TIMEOUT_S = 30;

/** What the chaos run needs of the app: the same settings for every process. */
const CHAOS_ENV: Record<string, string> = {
  LOG_LEVEL: "warn",
  ADMIN_TOKEN: CHAOS_ADMIN_TOKEN,
  PROVIDER_WEBHOOK_SECRET: CHAOS_WEBHOOK_SECRET,
  SESSION_SECRET: CHAOS_SESSION_SECRET,
  // MockPay's retry schedule, a hundred times faster: 15 s becomes 150 ms.
  PROVIDER_TIME_SCALE: "0.01",
  // Lost notifications are looked up at the provider after 3 s.
  PAYMENT_QUERY_AFTER_S: "3",
  PAYMENT_QUERY_INTERVAL_MS: "1000",
  OUTBOX_RELAY_INTERVAL_MS: "100",
  WORKER_HEARTBEAT_MS: "500",
  // Unpaid orders close after 30 s (the run's "orders left to time out"), checked every second.
  ORDER_PAYMENT_TIMEOUT_S: String(CHAOS_PAYMENT_TIMEOUT_S),
  ORDER_TIMEOUT_INTERVAL_MS: "1000",
  DB_POOL_MAX: "12",
  // Every shopper of the run comes from 127.0.0.1: limits per client address would turn the run away.
  GATEWAY_IDENTITY_POINTS: "1000000",
  GATEWAY_CLIENT_WRITE_POINTS: "1000000",
};

/** The chaos run's two app instances and worker, with its settings. */
export class Cluster extends AppCluster {
  constructor(
    options: Omit<AppClusterOptions, "env" | "workerEnv"> & {
      /** Probability that the worker kills itself right after a consumer committed. */
      consumerCrashRate: number;
      /** standard: MockPay's endpoints start as Standard Webhooks (v1), with a secret the merchant holds. */
      webhooks: "legacy" | "standard";
    },
  ) {
    super({
      ...options,
      env:
        options.webhooks === "standard"
          ? {
              ...CHAOS_ENV,
              MOCKPAY_WEBHOOK_FORMAT: "standard-v1",
              PROVIDER_STANDARD_WEBHOOK_SECRETS: CHAOS_STANDARD_SECRET,
            }
          : CHAOS_ENV,
      workerEnv: { FAULT_CONSUMER_CRASH_RATE: String(options.consumerCrashRate), WORKER_CONCURRENCY: "4" },
    });
  }
}
