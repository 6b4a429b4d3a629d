import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import path from "node:path";
import type postgres from "postgres";
import { pgClient } from "~/server/db/client";
import { type AppProcess, startAppProcess } from "./app-process";
import { freePort } from "./free-port";

export interface AppClusterOptions {
  databaseUrl: string;
  /** Settings of every process (app instances and worker); DATABASE_URL is added. */
  env: Record<string, string>;
  /** The worker's own settings on top. */
  workerEnv?: Record<string, string>;
  /** Folder for each process's log (warnings and errors). */
  logDir: string;
  log: (message: string) => void;
  /**
   * A load balancer in front of the instances (HAProxy): every client request, MockPay's notifications
   * and the worker's refund calls go to it, and the instances listen on `appPorts`.
   */
  loadBalancer?: { url: string; appPorts: number[] };
}

interface AppSlot {
  name: string;
  port: number;
  process?: AppProcess;
}

/**
 * Two app instances and one event worker on one database, each supervised:
 * the chaos run kills them, and they come back on the same address (MockPay
 * keeps notifying the address a payment was made on). `npm run cluster` runs
 * the same behind HAProxy.
 */
export class AppCluster {
  readonly apps: AppSlot[] = [];
  private worker?: ChildProcess;
  private stopping = false;
  workerCrashes = 0;
  private readonly admin: postgres.Sql;

  constructor(private readonly options: AppClusterOptions) {
    this.admin = pgClient(options.databaseUrl, { max: 1, onnotice: () => {} });
  }

  async start(): Promise<void> {
    const ports = this.options.loadBalancer?.appPorts ?? [await freePort(), await freePort()];
    this.apps.push(...["A", "B"].map((name, i) => ({ name, port: ports[i] as number })));
    await Promise.all(this.apps.map((slot) => this.startApp(slot)));
    this.startWorker();
  }

  /** The instance a client request goes to: the load balancer's address, or (without one) the client picks. */
  url(index: number): string {
    if (this.options.loadBalancer) return this.options.loadBalancer.url;
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

  /**
   * One step of a rolling restart: SIGTERM (the instance turns unready, serves through its grace, closes its
   * listener and finishes what it has), then a new process on the same port, ready. Returns how the old one
   * exited, how long it took to stop, and the whole step, in ms.
   */
  async restartApp(index: number): Promise<{ exitCode: number | null; stoppedMs: number; tookMs: number }> {
    const slot = this.apps[index];
    if (!slot?.process) throw new Error(`no app instance ${index}`);
    const started = Date.now();
    this.options.log(`restarting app ${slot.name} (SIGTERM, then a new process)`);
    const old = slot.process;
    await old.stop(60_000);
    const stoppedMs = Date.now() - started;
    slot.process = undefined;
    await this.startApp(slot);
    return { exitCode: old.child.exitCode, stoppedMs, tookMs: Date.now() - started };
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

  private processEnv(): Record<string, string> {
    return {
      ...this.options.env,
      DATABASE_URL: this.options.databaseUrl,
      ...(this.options.loadBalancer ? { APP_BASE_URL: this.options.loadBalancer.url } : {}),
    };
  }

  private async startApp(slot: AppSlot): Promise<void> {
    const process = await startAppProcess({
      port: slot.port,
      capture: true,
      readyTimeoutMs: 90_000,
      // Every simulated shopper comes from this machine's address: the per-address cap would count them as one.
      env: { HTTP_MAX_CONNECTIONS_PER_ADDRESS: "4096", ...this.processEnv(), WORKER_IN_APP: "false" },
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
        ...this.processEnv(),
        NODE_ENV: "production",
        // Refunds go to MockPay on instance A (if it is down, the submitter tries again), or through the load balancer.
        APP_BASE_URL: this.options.loadBalancer?.url ?? `http://127.0.0.1:${first?.port}`,
        ...this.options.workerEnv,
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
