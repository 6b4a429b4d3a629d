import path from "node:path";
import { z } from "zod";
import {
  localSecrets,
  productionSecretProblems,
  SECRET_NAMES,
  type SecretName,
  type Secrets,
} from "./env-secrets";

const DEFAULT_DATA_DIR = ".data/postgres";

/**
 * The only place that reads process.env. Every setting has a default that works
 * out of the box for development; see docs/configuration.md.
 */
/** "true" / "false" in the environment, as a boolean. */
const flag = (fallback: boolean) =>
  z
    .enum(["true", "false"])
    .default(fallback ? "true" : "false")
    .transform((v) => v === "true");

/** Every setting the app reads, with its default (docs/configuration.md documents each; a test holds the two together). */
/** A comma-separated setting's entries. */
export function entriesOf(value: string): string[] {
  return value
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);
}

/** How many bytes a base64 text holds; 0 when it is not base64. */
function base64Bytes(text: string): number {
  return /^[A-Za-z0-9+/]+={0,2}$/.test(text) ? Buffer.from(text, "base64").length : 0;
}

export const SETTINGS = z.object({
  NODE_ENV: z.enum(["development", "test", "production"]).default("development"),
  /** External PostgreSQL. When unset, the launcher starts an embedded server. */
  DATABASE_URL: z.url().optional(),
  PORT: z.coerce.number().int().min(1).max(65535).default(3000),
  /** Address the production server listens on (all interfaces by default, as `next start`). */
  HOST: z.string().min(1).default("0.0.0.0"),
  /** Port of the embedded PostgreSQL (never 5432, where a system server usually is). */
  EMBEDDED_PG_PORT: z.coerce
    .number()
    .int()
    .min(1024)
    .max(65535)
    .refine((p) => p !== 5432, "the embedded server must not take 5432")
    .default(54329),
  /** Folder for the embedded PostgreSQL's data, relative to the working directory. */
  DATA_DIR: z.string().min(1).default(DEFAULT_DATA_DIR),
  DB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().nonnegative().default(15_000),
  /** The server ends a session idle inside a transaction this long (0: never), releasing its locks. */
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: z.coerce.number().int().nonnegative().default(30_000),
  /**
   * The secrets (SESSION_SECRET, PROVIDER_WEBHOOK_SECRET, ADMIN_TOKEN) have no defaults: in production they
   * must be set (32+ characters); elsewhere the missing ones are generated once and kept in SECRETS_FILE.
   */
  SESSION_SECRET: z.string().min(16).optional(),
  /**
   * During a rotation of SESSION_SECRET: the secrets cookies and API tokens are still accepted under,
   * comma-separated (docs/deploy.md, "Rotating secrets"); only SESSION_SECRET signs.
   */
  SESSION_SECRET_PREVIOUS: z.string().optional(),
  SECRETS_FILE: z.string().min(1).default(".data/secrets.json"),
  IDEMPOTENCY_TTL_HOURS: z.coerce.number().positive().default(24),
  IDEMPOTENCY_LEASE_MS: z.coerce.number().int().positive().default(30_000),
  IDEMPOTENCY_WAIT_MS: z.coerce.number().int().nonnegative().default(5_000),
  IDEMPOTENCY_CLEANUP_INTERVAL_MS: z.coerce.number().int().nonnegative().default(60_000),
  /** Outcomes each instance keeps in memory to answer replays without the database (0: none). */
  IDEMPOTENCY_CACHE_ENTRIES: z.coerce.number().int().nonnegative().default(20_000),
  IDEMPOTENCY_BATCH_SIZE: z.coerce.number().int().min(1).max(64).default(8),
  IDEMPOTENCY_BATCH_RUNNERS: z.coerce.number().int().min(1).max(100).default(2),
  /** Where the mock provider sends notifications; defaults to this instance (http://127.0.0.1:PORT). */
  APP_BASE_URL: z.url().optional(),
  /** Shared between the merchant and the mock provider, as with a real provider's webhook secret. */
  PROVIDER_WEBHOOK_SECRET: z.string().min(16).optional(),
  /**
   * Standard Webhooks (src/server/payments/standard-webhooks.ts): the `whsec_` secrets a provider that signs
   * deliveries that way may use (`v1`), and its `whpk_` ed25519 public keys (`v1a`), comma-separated; more than
   * one during a rotation. Empty: such deliveries are refused as unsigned.
   */
  PROVIDER_STANDARD_WEBHOOK_SECRETS: z
    .string()
    .default("")
    .refine((value) => entriesOf(value).every((entry) => base64Bytes(entry.replace(/^whsec_/, "")) > 0), {
      message: "each entry is a whsec_ secret: base64 after the prefix",
    }),
  PROVIDER_STANDARD_WEBHOOK_PUBLIC_KEYS: z
    .string()
    .default("")
    .refine(
      (value) =>
        entriesOf(value).every((entry) => /^whpk_/.test(entry) && base64Bytes(entry.slice(5)) === 32),
      {
        message: "each entry is a whpk_ ed25519 public key: 32 bytes, base64",
      },
    ),
  /**
   * How MockPay signs deliveries to a merchant endpoint it has not sent to before: its own format, or Standard
   * Webhooks with a `v1` secret (the first of PROVIDER_STANDARD_WEBHOOK_SECRETS, or a new one) or a new `v1a`
   * key. Each endpoint can be switched later, from MockPay's console or `npm run mockpay`.
   */
  MOCKPAY_WEBHOOK_FORMAT: z.enum(["legacy", "standard-v1", "standard-v1a"]).default("legacy"),
  PROVIDER_APP_ID: z.string().min(1).default("app_checkout_demo"),
  /** Notification timestamps older or newer than this are refused. */
  PAYMENT_TIMESTAMP_TOLERANCE_S: z.coerce.number().int().positive().default(300),
  /** Compresses the provider's retry schedule: 0.01 turns 15 s into 150 ms. */
  PROVIDER_TIME_SCALE: z.coerce.number().positive().max(1).default(0.1),
  /** Send duplicates like real providers (two at once, one more after success). */
  PROVIDER_SEND_DUPLICATES: flag(true),
  /** The provider's API, for status queries; defaults to this app, where the mock provider lives. */
  PROVIDER_BASE_URL: z.url().optional(),
  /** An order not paid this long after it was placed is closed (and its pay link expires then). */
  ORDER_PAYMENT_TIMEOUT_S: z.coerce.number().int().positive().default(900),
  /** How often the job that closes timed-out orders runs (0: never). */
  ORDER_TIMEOUT_INTERVAL_MS: z.coerce.number().int().nonnegative().default(10_000),
  /** Payments still PENDING this long are looked up at the provider (lost notifications). */
  PAYMENT_QUERY_AFTER_S: z.coerce.number().int().positive().default(30),
  /** How often the status-query job runs (0: never). */
  PAYMENT_QUERY_INTERVAL_MS: z.coerce.number().int().nonnegative().default(10_000),
  /** Which real provider's retry schedule the mock copies. */
  PROVIDER_RETRY_SCHEDULE: z.enum(["wechat", "alipay"]).default("wechat"),
  PROVIDER_DELIVERY_POLL_MS: z.coerce.number().int().nonnegative().default(250),
  /** Run the event worker (outbox relay + consumers) inside each app instance. */
  WORKER_IN_APP: flag(true),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(50).default(4),
  OUTBOX_RELAY_INTERVAL_MS: z.coerce.number().int().min(10).default(200),
  /** How often each event worker proves it is alive; a worker silent for 5 beats is dead and its jobs are unlocked. */
  WORKER_HEARTBEAT_MS: z.coerce.number().int().min(50).default(2_000),
  /**
   * Liveness by work done: a job runner with no job finished and no empty poll for this long (or one job
   * running this long) is replaced; stuck again twice with nothing finished, the worker process exits for its
   * supervisor to start it afresh.
   */
  WORKER_STALL_MS: z.coerce.number().int().min(200).default(30_000),
  /** A request's headers and body must arrive within this long, or its connection is closed (a stalled body). */
  HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** The headers alone within this long. */
  HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(5_000),
  /** Open connections one client address may hold (not applied behind TRUST_PROXY); past it, 429. */
  HTTP_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().min(1).default(256),
  /** Open connections in all; past it, 503. */
  HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(4_096),
  /**
   * On SIGTERM the instance answers /readyz 503 at once and goes on serving this long, so the load balancer
   * stops sending before the listener closes; then requests in flight get HTTP_DRAIN_MS to finish.
   */
  HTTP_DRAIN_GRACE_MS: z.coerce.number().int().nonnegative().default(5_000),
  HTTP_DRAIN_MS: z.coerce.number().int().nonnegative().default(10_000),
  /**
   * Fault injection (npm run chaos), never in production: the probability that the event worker kills
   * itself (SIGKILL) right after a consumer committed its effect, before the queue hears about it.
   */
  FAULT_CONSUMER_CRASH_RATE: z.coerce.number().min(0).max(1).default(0),
  /** Guards /admin and /provider/admin (printed at start-up when it was generated). */
  ADMIN_TOKEN: z.string().min(8).optional(),
  /** How long a REST API token is valid after it was issued. */
  API_TOKEN_TTL_HOURS: z.coerce.number().positive().default(24),
  /** POST /api/v1/tokens makes new guest shoppers (handy in development; turn off where it is not wanted). */
  API_TOKENS_ENABLED: flag(true),
  /** The gateway layer (rate limits, duplicate bursts) in front of order, payment and refund creation. */
  GATEWAY_ENABLED: flag(true),
  /** Keep the gateway's counters in Redis instead of PostgreSQL. */
  REDIS_URL: z.url().optional(),
  GATEWAY_RATE_POINTS: z.coerce.number().int().positive().default(30),
  GATEWAY_RATE_WINDOW_S: z.coerce.number().int().positive().default(10),
  GATEWAY_DUPLICATE_POINTS: z.coerce.number().int().positive().default(5),
  GATEWAY_DUPLICATE_WINDOW_S: z.coerce.number().int().positive().default(1),
  /** New shopper identities (guest sessions, API tokens) one client address may make per minute. */
  GATEWAY_IDENTITY_POINTS: z.coerce.number().int().positive().default(30),
  /** Writes one client address may make per operation in GATEWAY_RATE_WINDOW_S, whoever it says it is. */
  GATEWAY_CLIENT_WRITE_POINTS: z.coerce.number().int().positive().default(120),
  /**
   * Which peers are trusted proxies, whose X-Forwarded-For / X-Forwarded-Proto are believed: off by default
   * (the socket's address is the client). "loopback", addresses or subnets ("10.0.0.0/8,loopback"), or a
   * number of hops. Set it only behind a proxy that overwrites those headers.
   */
  TRUST_PROXY: z.string().default(""),
  /** Serves /api/bench/trpc, the benchmark's unprotected baseline. Never in production. */
  BENCH_ROUTES: flag(false),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** JSON lines, or lines for a person; default: for a person in development, JSON otherwise. */
  LOG_FORMAT: z.enum(["json", "pretty"]).optional(),
  /**
   * The production server maps stack traces through source maps (the TypeScript lines of its own code), at the
   * cost of every loaded module's map held in memory, Next's included: about 50 MB. Off by default.
   */
  SOURCE_MAPS: flag(false),
});

export type Env = Omit<z.infer<typeof SETTINGS>, SecretName> &
  Secrets & {
    /** The secrets this process generated or read from SECRETS_FILE (not given by the environment). */
    generatedSecrets: SecretName[];
    databaseUrl: string;
    appBaseUrl: string;
    providerBaseUrl: string;
    /** SESSION_SECRET_PREVIOUS, split. */
    sessionSecretsPrevious: string[];
  };

/**
 * Where the embedded server puts its Unix socket: its data folder, unless that
 * path is too long for a socket address (then clients use TCP on 127.0.0.1).
 * A local socket costs less per round trip than loopback TCP.
 */
export function embeddedSocketDir(dataDir: string, port: number): string | undefined {
  const dir = path.resolve(dataDir);
  return `${dir}/.s.PGSQL.${port}`.length <= 100 ? dir : undefined;
}

export function embeddedDatabaseUrl(port: number, database = "checkout", dataDir = DEFAULT_DATA_DIR): string {
  const socketDir = embeddedSocketDir(dataDir, port);
  const url = new URL(`postgres://postgres:password@127.0.0.1:${port}/${database}`);
  if (socketDir) url.searchParams.set("host", socketDir);
  return url.toString();
}

function load(): Env {
  const parsed = SETTINGS.safeParse(process.env);
  if (!parsed.success) {
    throw new Error(`Invalid environment:\n${z.prettifyError(parsed.error)}`);
  }
  const env = parsed.data;
  const given = {
    SESSION_SECRET: env.SESSION_SECRET,
    PROVIDER_WEBHOOK_SECRET: env.PROVIDER_WEBHOOK_SECRET,
    ADMIN_TOKEN: env.ADMIN_TOKEN,
  };
  let secrets: Secrets;
  let generatedSecrets: SecretName[] = [];
  if (env.NODE_ENV === "production") {
    const problems = productionSecretProblems(given);
    if (problems.length > 0) {
      throw new Error(
        `NODE_ENV=production needs its secrets from the environment:\n- ${problems.join("\n- ")}`,
      );
    }
    secrets = given as Secrets;
  } else {
    generatedSecrets = SECRET_NAMES.filter((name) => !given[name]);
    const local = generatedSecrets.length > 0 ? localSecrets(path.resolve(env.SECRETS_FILE)) : undefined;
    secrets = Object.fromEntries(SECRET_NAMES.map((name) => [name, given[name] || local?.[name]])) as Secrets;
  }
  const appBaseUrl = (env.APP_BASE_URL ?? `http://127.0.0.1:${env.PORT}`).replace(/\/$/, "");
  return {
    ...env,
    ...secrets,
    generatedSecrets,
    databaseUrl: env.DATABASE_URL ?? embeddedDatabaseUrl(env.EMBEDDED_PG_PORT, "checkout", env.DATA_DIR),
    appBaseUrl,
    providerBaseUrl: (env.PROVIDER_BASE_URL ?? appBaseUrl).replace(/\/$/, ""),
    sessionSecretsPrevious: entriesOf(env.SESSION_SECRET_PREVIOUS ?? ""),
  };
}

let cached: Env | undefined;
export function getEnv(): Env {
  cached ??= load();
  return cached;
}
