import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";

const TSX = createRequire(import.meta.url).resolve("tsx/cli");

/** One run of a worker's periodic task, as its log line tells it (src/server/fulfilment/worker.ts). */
export interface TaskRun {
  task: string;
  /** When the run ended (ms since the epoch). */
  at: number;
  ms: number;
  cpuMs: number;
  ok: boolean;
}

/**
 * `npm run worker` as a process of its own, its log at debug level read for the runs of its periodic tasks
 * (`runs` grows as they come). `stop` sends SIGTERM and waits for the exit.
 */
export function startWorkerProcess(env: Record<string, string>): {
  child: ChildProcess;
  runs: TaskRun[];
  stop(): Promise<void>;
} {
  const child = spawn(process.execPath, [TSX, "scripts/worker.ts"], {
    env: { ...process.env, LOG_LEVEL: "debug", LOG_FORMAT: "json", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const runs: TaskRun[] = [];
  let rest = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.includes('"periodic task ran"')) continue;
      const entry = JSON.parse(line) as {
        task: string;
        time: number;
        ms: number;
        cpuMs: number;
        ok: boolean;
      };
      runs.push({ task: entry.task, at: entry.time, ms: entry.ms, cpuMs: entry.cpuMs, ok: entry.ok });
    }
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    child,
    runs,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
