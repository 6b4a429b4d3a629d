import { readdirSync, readFileSync } from "node:fs";

/** CPU time (user + system, ms) a process has used so far, from /proc; 0 if it is gone. */
export function processCpuMs(pid: number | undefined, statFile = `/proc/${pid}/stat`): number {
  if (!pid) return 0;
  try {
    const stat = readFileSync(statFile, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : 0; // USER_HZ is 100 on Linux
  } catch {
    return 0;
  }
}

/**
 * CPU time (ms) of a process's main thread alone (/proc/<pid>/task/<pid>): what bounds a Node server, whose
 * JavaScript runs on that one thread while the collector's helpers and libuv's pool run beside it.
 */
export function mainThreadCpuMs(pid: number | undefined): number {
  return pid ? processCpuMs(pid, `/proc/${pid}/task/${pid}/stat`) : 0;
}

/** CPU time of every PostgreSQL process on this machine (server, backends, walwriter…). */
export function postgresCpuMs(): number {
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === "postgres")
        total += processCpuMs(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return total;
}

/** CPU time (user + system, ms) this process has used so far. */
export function ownCpuMs(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1000;
}

/**
 * Where a scenario's CPU went, per request: the app process(es), PostgreSQL, and the load generator
 * (this process, which runs autocannon). The load generator shares the machine's cores with the others,
 * so its share bounds what any server could reach in the same run. A scenario whose "app" is this
 * process (no HTTP) passes `null` for the load generator.
 */
export class CpuMeter {
  private app = 0;
  private appThread = 0;
  private db = 0;
  private load = 0;
  private requests = 0;

  constructor(
    private readonly appCpuMs: () => number,
    private readonly loadCpuMs: (() => number) | null = ownCpuMs,
    /** The app's main thread alone, where it is one process. */
    private readonly appThreadCpuMs: (() => number) | null = null,
  ) {}

  /** Measures one run; call as many times as the scenario has runs. */
  async measure<R>(work: () => Promise<R>, requestsOf: (result: R) => number): Promise<R> {
    const app0 = this.appCpuMs();
    const db0 = postgresCpuMs();
    const load0 = this.loadCpuMs?.() ?? 0;
    const thread0 = this.appThreadCpuMs?.() ?? 0;
    const result = await work();
    this.app += this.appCpuMs() - app0;
    this.appThread += (this.appThreadCpuMs?.() ?? 0) - thread0;
    this.db += postgresCpuMs() - db0;
    this.load += (this.loadCpuMs?.() ?? 0) - load0;
    this.requests += requestsOf(result);
    return result;
  }

  perRequest(): { appCpuMs: number; dbCpuMs: number; loadCpuMs?: number; appThreadCpuMs?: number } {
    const per = (ms: number) => Math.round((ms / Math.max(1, this.requests)) * 100) / 100;
    return {
      appCpuMs: per(this.app),
      dbCpuMs: per(this.db),
      ...(this.loadCpuMs ? { loadCpuMs: per(this.load) } : {}),
      ...(this.appThreadCpuMs ? { appThreadCpuMs: per(this.appThread) } : {}),
    };
  }
}
