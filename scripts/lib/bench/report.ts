import { mkdirSync, writeFileSync } from "node:fs";
import { CONNECTIONS, DURATION, PAID, type Row, STORM } from "./settings";

/** Prints the table and the ratios, writes bench-results/; false when a correctness count is wrong. */
export function report(rows: Row[]): boolean {
  const by = (prefix: string) => rows.find((r) => r.scenario.startsWith(prefix))?.requestsPerSec ?? 0;
  const ratios = {
    firstOverBaseline: by("2") / Math.max(1, by("1")),
    replayOverFirst: by("3") / Math.max(1, by("2")),
    firstOverDatabaseFloor: by("2") / Math.max(1, by("7")),
  };
  const table = [
    "| scenario | req/s | p50 ms | p99 ms | app CPU ms/req | db CPU ms/req | peak RSS MB | correctness |",
    "|---|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.requestsPerSec} | ${r.p50Ms} | ${r.p99Ms} | ${r.appCpuMs ?? "?"} | ${r.dbCpuMs ?? "?"} | ${r.peakRssMb ?? "?"} | ${r.ok ? "✓" : "✗"} ${r.correctness} |`,
    ),
  ].join("\n");
  console.log(`\n${table}\n`);
  console.log(
    `ratios: first/baseline ${ratios.firstOverBaseline.toFixed(2)} (target ≥ 0.8), replay/first ${ratios.replayOverFirst.toFixed(2)} (target ≥ 1.5), first/database floor ${ratios.firstOverDatabaseFloor.toFixed(2)} (target ≥ 0.5)`,
  );
  mkdirSync("bench-results", { recursive: true });
  const result = {
    at: new Date().toISOString(),
    parameters: { DURATION, CONNECTIONS, STORM, PAID },
    rows,
    ratios,
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
