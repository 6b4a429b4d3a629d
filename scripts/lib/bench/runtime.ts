import { BENCH_ADMIN_TOKEN, type RuntimeWindow } from "./settings";

/**
 * What the app's event loop and GC did while a round ran, read from its Prometheus metrics (/api/metrics, prom-client's defaults): the event loop's
 * delay since the last read (prom-client resets it at each read), and GC pauses as a running sum.
 */
interface Reading {
  lagP99Ms: number;
  lagMaxMs: number;
  gcSeconds: number;
  gcCount: number;
}

async function read(baseUrl: string): Promise<Reading | undefined> {
  const response = await fetch(`${baseUrl}/api/metrics`, {
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
  }).catch(() => undefined);
  if (!response?.ok) return undefined;
  const text = await response.text();
  const one = (name: string) =>
    Number(new RegExp(`^${name} ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? Number.NaN);
  const sum = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "gm"))].reduce(
      (total, match) => total + Number(match[1]),
      0,
    );
  return {
    lagP99Ms: one("nodejs_eventloop_lag_p99_seconds") * 1000,
    lagMaxMs: one("nodejs_eventloop_lag_max_seconds") * 1000,
    gcSeconds: sum("nodejs_gc_duration_seconds_sum"),
    gcCount: sum("nodejs_gc_duration_seconds_count"),
  };
}

/** Runs `work` and says what the app's runtime did meanwhile (undefined when its metrics cannot be read). */
export async function withRuntime<T>(
  baseUrl: string,
  work: () => Promise<T>,
): Promise<{ value: T; runtime: RuntimeWindow | undefined }> {
  const before = await read(baseUrl);
  const value = await work();
  const after = await read(baseUrl);
  if (!before || !after) return { value, runtime: undefined };
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    value,
    runtime: {
      eventLoopP99Ms: round(after.lagP99Ms),
      eventLoopMaxMs: round(after.lagMaxMs),
      gcMs: round((after.gcSeconds - before.gcSeconds) * 1000),
      gcPauses: after.gcCount - before.gcCount,
    },
  };
}

/** A row's rounds as one line: each round's event-loop delay and GC. */
export function describeRuntime(scenario: string, windows: (RuntimeWindow | undefined)[]): string {
  const rounds = windows.map((w, i) =>
    w
      ? `round ${i + 1}: event loop p99 ${w.eventLoopP99Ms} ms, max ${w.eventLoopMaxMs} ms, GC ${w.gcMs} ms in ${w.gcPauses} pauses`
      : `round ${i + 1}: not read`,
  );
  return `runtime: ${scenario}: ${rounds.join("; ")}`;
}
