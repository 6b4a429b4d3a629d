import type { Observer } from "~/server/observability/observer";

/** Work a worker runs every `everyMs`, one run at a time, given up on after `deadlineMs` (default 5 min). */
export interface PeriodicTask {
  name: string;
  everyMs: number;
  deadlineMs?: number;
  run: () => Promise<unknown>;
}

/** One run of a periodic task, its time and the process's CPU meanwhile told to the observer. */
export async function measured(task: PeriodicTask, observer: Observer | undefined): Promise<void> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  let ok = false;
  try {
    await task.run();
    ok = true;
  } finally {
    const used = process.cpuUsage(cpu);
    observer?.backgroundTask?.({
      task: task.name,
      ms: performance.now() - started,
      cpuMs: (used.user + used.system) / 1000,
      ok,
    });
  }
}
