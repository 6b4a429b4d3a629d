import { mkdirSync, writeFileSync } from "node:fs";
import { CONNECTIONS, DURATION, PAID, type Row, STORM } from "./settings";

/** Prints the table and the ratios, writes bench-results/; false when a correctness count is wrong. */
/** The targets, each a ratio of two rows' req/s measured in the same run (issue 14). */
export const TARGETS = [
  { name: "first execution over tRPC / floor", over: "first-trpc", under: "floor", atLeast: 0.9 },
  { name: "first execution over REST / floor", over: "first-rest", under: "floor", atLeast: 0.9 },
  { name: "replay over tRPC / floor", over: "replay-trpc", under: "floor", atLeast: 4 },
  { name: "replay over REST / floor", over: "replay-rest", under: "floor", atLeast: 4 },
] as const;
export const PEAK_RSS_TARGET_MB = 300;

export interface Ratio {
  name: string;
  value: number;
  atLeast: number;
  met: boolean;
}

export function ratiosOf(rows: Row[]): Ratio[] {
  const rate = (id: string) => rows.find((r) => r.id === id)?.requestsPerSec ?? 0;
  return TARGETS.map((t) => {
    const value = Math.round((rate(t.over) / Math.max(1, rate(t.under))) * 100) / 100;
    return { name: t.name, value, atLeast: t.atLeast, met: value >= t.atLeast };
  });
}

/** Prints the table and the ratios, writes bench-results/; false when a correctness count is wrong. */
export function report(
  rows: Row[],
  appPeakRssMb: number | null,
  profiles: { ratio: string; lines: string[] }[] = [],
): boolean {
  const ratios = ratiosOf(rows);
  const table = [
    "| scenario | req/s | p50 ms | p99 ms | app CPU ms/req | db CPU ms/req | peak RSS MB | correctness |",
    "|---|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.requestsPerSec} | ${r.p50Ms} | ${r.p99Ms} | ${r.appCpuMs ?? "?"} | ${r.dbCpuMs ?? "?"} | ${r.peakRssMb ?? "?"} | ${r.ok ? "✓" : "✗"} ${r.correctness} |`,
    ),
  ].join("\n");
  console.log(`\n${table}\n`);
  for (const ratio of ratios) {
    console.log(
      `ratio: ${ratio.name} ${ratio.value.toFixed(2)} (target ≥ ${ratio.atLeast}) ${ratio.met ? "✓" : "— missed"}`,
    );
  }
  const rssMet = appPeakRssMb !== null && appPeakRssMb <= PEAK_RSS_TARGET_MB;
  console.log(
    `peak RSS of the app instance over the whole run: ${appPeakRssMb ?? "?"} MB (target ≤ ${PEAK_RSS_TARGET_MB}) ${rssMet ? "✓" : "— missed"}`,
  );
  for (const profile of profiles) {
    console.log(`\nprofile for "${profile.ratio}":\n${profile.lines.join("\n")}`);
  }
  mkdirSync("bench-results", { recursive: true });
  const result = {
    at: new Date().toISOString(),
    parameters: { DURATION, CONNECTIONS, STORM, PAID },
    rows,
    ratios,
    appPeakRssMb,
    profiles,
  };
  writeFileSync("bench-results/latest.json", JSON.stringify(result, null, 2));
  const max = Math.max(1, ...rows.map((r) => r.requestsPerSec));
  writeFileSync(
    "bench-results/latest.html",
    `<!doctype html><meta charset="utf-8"><title>bench</title><h1>Checkout benchmark</h1><p>${result.at}</p>${rows
      .map(
        (r) =>
          `<div style="font:14px sans-serif;margin:4px 0">${r.scenario}<div style="background:#0a5cd6;height:14px;width:${Math.round((r.requestsPerSec / max) * 600)}px"></div>${r.requestsPerSec} req/s · p99 ${r.p99Ms} ms · ${r.correctness}</div>`,
      )
      .join("")}`,
  );
  const failed = rows.filter((r) => !r.ok);
  if (failed.length > 0) console.error(`correctness failed: ${failed.map((r) => r.scenario).join(", ")}`);
  return failed.length === 0;
}
