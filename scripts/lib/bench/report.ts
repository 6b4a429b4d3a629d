import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
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
  writeFileSync("bench-results/latest.html", htmlReport(result.at, rows, ratios, appPeakRssMb));
  const failed = rows.filter((r) => !r.ok);
  if (failed.length > 0) console.error(`correctness failed: ${failed.map((r) => r.scenario).join(", ")}`);
  return failed.length === 0;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);

/** uPlot's script and stylesheet, inlined so the report opens offline from the file. */
function uPlotAssets(): { script: string; style: string } {
  const require = createRequire(path.join(process.cwd(), "package.json"));
  const dist = path.dirname(require.resolve("uplot/dist/uPlot.iife.min.js"));
  return {
    script: readFileSync(path.join(dist, "uPlot.iife.min.js"), "utf8"),
    style: readFileSync(path.join(dist, "uPlot.min.css"), "utf8"),
  };
}

const COLOURS = [
  "#0a5cd6",
  "#0b7a57",
  "#b42318",
  "#8a5a00",
  "#6b3fa0",
  "#1d1d1f",
  "#c2410c",
  "#0e7490",
  "#a21caf",
];

/**
 * The report as a page: the table, the ratios, requests per second as bars, and each scenario's latency
 * distribution (ms by percentile, log scale) as one chart, drawn with uPlot.
 */
export function htmlReport(at: string, rows: Row[], ratios: Ratio[], appPeakRssMb: number | null): string {
  const { script, style } = uPlotAssets();
  const curves = rows.filter((r) => r.latency && r.latency.length > 0);
  const percentiles = curves[0]?.latency?.map((p) => p.percentile) ?? [];
  const data = {
    percentiles,
    series: curves.map((r, i) => ({
      label: r.scenario,
      color: COLOURS[i % COLOURS.length],
      values: percentiles.map((p) => Math.max(0.01, r.latency?.find((x) => x.percentile === p)?.ms ?? 0)),
    })),
    throughput: rows
      .filter((r) => r.requestsPerSec > 0)
      .map((r) => ({ label: r.scenario, value: r.requestsPerSec })),
  };
  const max = Math.max(1, ...data.throughput.map((t) => t.value));
  const tableRows = rows
    .map(
      (r) =>
        `<tr><td>${escapeHtml(r.scenario)}</td><td>${r.requestsPerSec}</td><td>${r.p50Ms}</td><td>${r.p99Ms}</td><td>${r.appCpuMs ?? "?"}</td><td>${r.dbCpuMs ?? "?"}</td><td>${r.peakRssMb ?? "?"}</td><td>${r.ok ? "✓" : "✗"} ${escapeHtml(r.correctness)}</td></tr>`,
    )
    .join("");
  const bars = data.throughput
    .map(
      (t) =>
        `<div class="bar"><span>${escapeHtml(t.label)}</span><div style="width:${Math.round((t.value / max) * 100)}%"></div><b>${t.value}</b></div>`,
    )
    .join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Checkout benchmark ${escapeHtml(at)}</title>
<style>${style}
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:64rem;padding:0 1rem;color:#1d1d1f}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{border-bottom:1px solid #e3e3e8;padding:.3rem .4rem;text-align:left}
.bar{display:grid;grid-template-columns:16rem 1fr 5rem;gap:.5rem;align-items:center;margin:.2rem 0}
.bar div{background:#0a5cd6;height:.9rem;border-radius:2px}.bar b{text-align:right}
figure{margin:1rem 0}figcaption{color:#6b6b70}
</style></head><body>
<h1>Checkout benchmark</h1><p>${escapeHtml(at)} · peak RSS of the app instance ${appPeakRssMb ?? "?"} MB</p>
<h2>Ratios (one run, against the bare floor)</h2><ul>${ratios
    .map(
      (r) =>
        `<li>${escapeHtml(r.name)}: <b>${r.value.toFixed(2)}</b> (target ≥ ${r.atLeast}) ${r.met ? "✓" : "missed"}</li>`,
    )
    .join("")}</ul>
<h2>Requests per second</h2>${bars}
<h2>Latency distribution</h2>
<figure><div id="latency"></div><figcaption>Milliseconds (log scale) within which each percentile of requests was answered, per scenario.</figcaption></figure>
<h2>All figures</h2>
<table><thead><tr><th>scenario</th><th>req/s</th><th>p50 ms</th><th>p99 ms</th><th>app CPU ms/req</th><th>db CPU ms/req</th><th>peak RSS MB</th><th>correctness</th></tr></thead><tbody>${tableRows}</tbody></table>
<script>${script}</script>
<script>
const data = ${JSON.stringify(data)};
const box = document.getElementById("latency");
new uPlot({
  width: box.clientWidth, height: 420,
  scales: { x: { time: false }, y: { distr: 3 } },
  axes: [
    { label: "percentile", values: (u, ticks) => ticks.map((t) => data.percentiles[t] === undefined ? "" : "p" + data.percentiles[t]) },
    { label: "ms", size: 60 },
  ],
  series: [{ label: "percentile", value: (u, i) => i == null ? "" : "p" + data.percentiles[i] },
    ...data.series.map((s) => ({ label: s.label, stroke: s.color, width: 2, points: { show: true } }))],
}, [data.percentiles.map((_, i) => i), ...data.series.map((s) => s.values)], box);
</script>
</body></html>
`;
}
