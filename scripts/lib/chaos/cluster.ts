import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import path from "node:path";
import type postgres from "postgres";
import { pgClient } from "~/server/db/client";
import { type AppProcess, startAppProcess } from "../app-process";
import { freePort } from "../free-port";

export const CHAOS_ADMIN_TOKEN = "chaos-admin-token-0123456789abcdefghij";
export const CHAOS_WEBHOOK_SECRET = "whsec_chaos_secret_0123456789abcdefgh";
const CHAOS_SESSION_SECRET = "chaos-session-secret-0123456789abcdefghij";

export interface ClusterOptions {
  databaseUrl: string;
  /** Folder for each process's log (warnings and errors). */
  logDir: string;
  /** Probability that the worker kills itself right after a consumer committed. */
  consumerCrashRate: number;
  log: (message: string) => void;
}

/** How long an order may wait for its payment in the run. */
export const CHAOS_PAYMENT_TIMEOUT_S = 30;

/** What the chaos run needs of the app: the same settings for every process. */
function sharedEnv(options: ClusterOptions): Record<string, string> {
  return {
    DATABASE_URL: options.databaseUrl,
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
}

interface AppSlot {
  name: string;
  port: number;
  process?: AppProcess;
}

/**
 * Two app instances and one event worker on one database, each supervised:
 * the chaos run kills them, and they come back on the same address (MockPay
 * keeps notifying the address a payment was made on).
 */
export class Cluster {
  readonly apps: AppSlot[] = [];
  private worker?: ChildProcess;
  private stopping = false;
  workerCrashes = 0;
  private readonly admin: postgres.Sql;

  constructor(private readonly options: ClusterOptions) {
    this.admin = pgClient(options.databaseUrl, { max: 1, onnotice: () => {} });
  }

  async start(): Promise<void> {
    for (const name of ["A", "B"]) this.apps.push({ name, port: await freePort() });
    await Promise.all(this.apps.map((slot) => this.startApp(slot)));
    this.startWorker();
  }

  /** The instance a client request goes to (a load balancer's choice). */
  url(index: number): string {
    const slot = this.apps[index % this.apps.length];
    if (!slot) throw new Error("no app instance");
    return `http://127.0.0.1:${slot.port}`;
  }

  /** SIGKILL an instance mid-run, and start it again on the same port after `downMs`. */
  async killApp(index: number, downMs: number): Promise<void> {
    const slot = this.apps[index];
    if (!slot?.process) return;
    this.options.log(`killing app ${slot.name} (SIGKILL); back in ${downMs} ms`);
    await slot.process.kill();
    slot.process = undefined;
    await new Promise((resolve) => setTimeout(resolve, downMs));
    if (!this.stopping) await this.startApp(slot);
  }

  /** Terminates every other session on the database: pools, the worker's queue connections, all. */
  async dropDatabaseConnections(): Promise<number> {
    const rows = await this.admin<{ terminated: boolean }[]>`
      SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`;
    this.options.log(`dropped ${rows.length} database connections`);
    return rows.length;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const worker = this.worker;
    if (worker && worker.exitCode === null && worker.signalCode === null) {
      const exited = new Promise((resolve) => worker.once("exit", resolve));
      worker.kill("SIGTERM");
      const killer = setTimeout(() => worker.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(killer);
    }
    await Promise.all(this.apps.map((slot) => slot.process?.stop()));
    await this.admin.end({ timeout: 2 });
  }

  private async startApp(slot: AppSlot): Promise<void> {
    const process = await startAppProcess({
      port: slot.port,
      capture: true,
      readyTimeoutMs: 90_000,
      env: { ...sharedEnv(this.options), WORKER_IN_APP: "false" },
    });
    const file = path.join(this.options.logDir, `app-${slot.name}.log`);
    const write = (chunk: Buffer) => appendFileSync(file, chunk);
    appendFileSync(file, process.output());
    process.child.stdout?.on("data", write);
    process.child.stderr?.on("data", write);
    slot.process = process;
  }

  /**
   * Freezes the event worker (SIGSTOP) for `ms`, then lets it go on (SIGCONT): events queue up
   * meanwhile, so refunds complete while their order's OrderPaid still waits.
   */
  async pauseWorker(ms: number): Promise<void> {
    const worker = this.worker;
    if (!worker || worker.exitCode !== null || worker.signalCode !== null) return;
    this.options.log(`pausing the worker (SIGSTOP) for ${ms} ms`);
    worker.kill("SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, ms));
    worker.kill("SIGCONT");
  }

  /** `npm run worker`, restarted whenever it dies. */
  private startWorker(): void {
    const [first] = this.apps;
    const child = spawn(process.execPath, ["--import", "tsx", "scripts/worker.ts"], {
      env: {
        ...process.env,
        ...sharedEnv(this.options),
        NODE_ENV: "production",
        // Refunds go to MockPay on instance A (if it is down, the submitter tries again).
        APP_BASE_URL: `http://127.0.0.1:${first?.port}`,
        FAULT_CONSUMER_CRASH_RATE: String(this.options.consumerCrashRate),
        WORKER_CONCURRENCY: "4",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const file = path.join(this.options.logDir, "worker.log");
    const write = (chunk: Buffer) => appendFileSync(file, chunk);
    child.stdout?.on("data", write);
    child.stderr?.on("data", write);
    child.once("exit", () => {
      if (this.stopping) return;
      this.workerCrashes++;
      setTimeout(() => this.startWorker(), 200);
    });
    this.worker = child;
  }
}
