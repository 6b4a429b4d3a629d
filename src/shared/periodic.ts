import type { Logger } from "pino";

/**
 * Runs `work` every `intervalMs`, one run at a time. A run that has not settled
 * after `deadlineMs` is given up on (logged at error level) so the loop goes on:
 * a query can hang when its connection dies at the wrong moment (postgres.js),
 * and a background loop that waits for it forever — the outbox relay, say —
 * would stop the whole system without a sound.
 */
export function every(
  intervalMs: number,
  work: () => Promise<unknown>,
  options: { name: string; log: Logger; deadlineMs?: number; startNow?: boolean },
): NodeJS.Timeout {
  const deadlineMs = options.deadlineMs ?? 30_000;
  let running: { since: number } | undefined;
  const tick = () => {
    if (running) {
      if (Date.now() - running.since < deadlineMs) return;
      options.log.error(
        { job: options.name, ms: Date.now() - running.since },
        "background run hung; starting over",
      );
    }
    const run = { since: Date.now() };
    running = run;
    work()
      .catch((err: unknown) =>
        options.log.warn({ err, job: options.name }, "background run failed; will retry"),
      )
      .finally(() => {
        if (running === run) running = undefined;
      });
  };
  const timer = setInterval(tick, intervalMs);
  if (options.startNow) tick();
  timer.unref();
  return timer;
}
