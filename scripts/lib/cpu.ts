import { readdirSync, readFileSync } from "node:fs";

/** CPU time (user + system, ms) a process has used so far, from /proc; 0 if it is gone. */
export function processCpuMs(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : 0; // USER_HZ is 100 on Linux
  } catch {
    return 0;
  }
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

/** Where a scenario's CPU went, per request: the app process(es) and PostgreSQL. */
export class CpuMeter {
  private app = 0;
  private db = 0;
  private requests = 0;

  constructor(private readonly appCpuMs: () => number) {}

  /** Measures one run; call as many times as the scenario has runs. */
  async measure<R>(work: () => Promise<R>, requestsOf: (result: R) => number): Promise<R> {
    const app0 = this.appCpuMs();
    const db0 = postgresCpuMs();
    const result = await work();
    this.app += this.appCpuMs() - app0;
    this.db += postgresCpuMs() - db0;
    this.requests += requestsOf(result);
    return result;
  }

  perRequest(): { appCpuMs: number; dbCpuMs: number } {
    const per = (ms: number) => Math.round((ms / Math.max(1, this.requests)) * 100) / 100;
    return { appCpuMs: per(this.app), dbCpuMs: per(this.db) };
  }
}
