import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import path from "node:path";
import { FRAMEWORKS } from "./floor";
import { describeRuntime } from "./runtime";
import { CONNECTIONS, DURATION, PAID, type Row, STORM } from "./settings";

/** The targets, each a ratio of two rows' req/s measured in the same run. */
export const TARGETS: readonly {
  name: string;
  over: string;
  under: string;
  atLeast: number;
  stretch?: number;
}[] = [
  // Issue 27: beside the library people would pick instead (@node-idempotency + Redis in Express, ./peer-server.ts).
  {
    name: "first execution over REST / peer",
    over: "first-rest",
    under: "peer-first",
    atLeast: 0.8,
    stretch: 1,
  },
  {
    name: "first execution over tRPC / peer",
    over: "first-trpc",
    under: "peer-first",
    atLeast: 0.65,
    stretch: 0.85,
  },
  { name: "replay over REST / peer", over: "replay-rest", under: "peer-replay", atLeast: 1, stretch: 1.5 },
  { name: "replay over tRPC / peer", over: "replay-trpc", under: "peer-replay", atLeast: 0.8, stretch: 1.2 },
  // Issue 27: cost as the tables grow (./scenarios/million-rows.ts).
  {
    name: "first execution over REST with 1M orders and records / empty",
    over: "scale-after",
    under: "scale-before",
    atLeast: 0.85,
    stretch: 0.95,
  },
  // Issue 43: each adapter of the package beside the peer in the same framework (./scenarios/adapter-paths.ts).
  ...FRAMEWORKS.flatMap((framework) => [
    {
      name: `adapter first execution, ${framework} / peer in ${framework}`,
      over: `adapter-${framework}-first`,
      under: `adapter-peer-${framework}-first`,
      atLeast: 1,
    },
    {
      name: `adapter replay, ${framework} / peer in ${framework}`,
      over: `adapter-${framework}-replay`,
      under: `adapter-peer-${framework}-replay`,
      atLeast: 1,
    },
  ]),
  // Issue 44: background work never takes the request path's CPU (./scenarios/background-work.ts).
  {
    name: "replay over REST with every periodic task running / without",
    over: "background-busy",
    under: "background-quiet",
    atLeast: 0.9,
  },
  // Issue 14: beside a bare node:http server placing the same order with nothing else (./floor-server.ts).
  { name: "first execution over tRPC / floor", over: "first-trpc", under: "floor", atLeast: 0.9 },
  { name: "first execution over REST / floor", over: "first-rest", under: "floor", atLeast: 0.9 },
  { name: "replay over tRPC / floor", over: "replay-trpc", under: "floor", atLeast: 4 },
  { name: "replay over REST / floor", over: "replay-rest", under: "floor", atLeast: 4 },
];
export const PEAK_RSS_TARGET_MB = 300;
/** Issue 27: app CPU per signed notification in the callback storm (./scenarios/callback-storm.ts). */
export const CALLBACK_CPU_TARGET_MS = 1.0;

export interface Ratio {
  name: string;
  /** Over the whole run (all rounds together). */
  value: number;
  /** Round by round, where both rows were measured in the same interleaved rounds. */
  rounds?: number[];
  /** The worst round (the value itself when there are no rounds): what a must holds on. */
  min: number;
  atLeast: number;
  met: boolean;
  /** Both rows were measured in this run (the peer's are skipped when no Redis answers). */
  measured: boolean;
}

export function ratiosOf(rows: Row[]): Ratio[] {
  const row = (id: string) => rows.find((r) => r.id === id);
  const ratio = (over: number, under: number) => Math.round((over / Math.max(1, under)) * 100) / 100;
  return TARGETS.map((t) => {
    const over = row(t.over);
    const under = row(t.under);
    if (!over || !under)
      return { name: t.name, value: 0, min: 0, atLeast: t.atLeast, met: false, measured: false };
    const value = ratio(over.requestsPerSec, under.requestsPerSec);
    // Round by round only when both rows took turns in the same rounds (the same number of them).
    const rounds =
      over.rounds && under.rounds && over.rounds.length === under.rounds.length && over.rounds.length > 1
        ? over.rounds.map((r, i) => ratio(r, under.rounds?.[i] ?? 0))
        : undefined;
    const min = rounds ? Math.min(...rounds) : value;
    return {
      name: t.name,
      value,
      ...(rounds ? { rounds } : {}),
      min,
      atLeast: t.atLeast,
      met: min >= t.atLeast,
      measured: true,
    };
  });
}

/** A ratio as the bench prints it: the run's value, each round's and the worst, the target, and whether it held. */
export function describeRatio(ratio: Ratio): string {
  if (!ratio.measured) return `ratio: ${ratio.name}: not measured in this run (a row is missing)`;
  const rounds = ratio.rounds
    ? ` (rounds ${ratio.rounds.map((r) => r.toFixed(2)).join(" / ")}, min ${ratio.min.toFixed(2)})`
    : "";
  return `ratio: ${ratio.name} ${ratio.value.toFixed(2)}${rounds} (target ≥ ${ratio.atLeast}, on the min) ${ratio.met ? "✓" : "— missed"}`;
}

/**
 * Requests per second that CPU alone allows a row: the app (one Node thread), PostgreSQL and the load
 * generator (one thread too) share the machine's cores. Undefined when the row has no CPU figures.
 */
export function cpuBound(
  cpu: { appCpuMs?: number; dbCpuMs?: number; loadCpuMs?: number; appThreadCpuMs?: number },
  cores: number,
): number | undefined {
  const { appCpuMs = 0, dbCpuMs = 0, loadCpuMs = 0 } = cpu;
  const total = appCpuMs + dbCpuMs + loadCpuMs;
  if (total <= 0) return undefined;
  // The app's JavaScript runs on its main thread; its other threads (the collector's helpers) run beside it.
  const appThread = cpu.appThreadCpuMs ?? appCpuMs;
  const singleThreaded = [appThread, loadCpuMs].filter((ms) => ms > 0).map((ms) => 1000 / ms);
  return Math.min((cores * 1000) / total, ...singleThreaded);
}

export interface CpuModel {
  ratio: string;
  measured: number;
  /** The ratio the two rows' CPU per request predicts (bound over bound). */
  predicted: number;
  /** The most this path's app CPU per request could be and still meet the target, given the rest; ≤ 0: out of reach. */
  appBudgetMs: number;
}

/**
 * Why a ratio is what it is, from CPU per request alone: what the rows' CPU predicts, and the app CPU per
 * request the target would leave room for once PostgreSQL and the load generator have taken theirs.
 */
export function cpuModelOf(rows: Row[], cores = availableParallelism()): CpuModel[] {
  return TARGETS.flatMap((t) => {
    const over = rows.find((r) => r.id === t.over);
    const under = rows.find((r) => r.id === t.under);
    if (!over || !under) return [];
    const overBound = cpuBound(over, cores);
    const underBound = cpuBound(under, cores);
    if (!overBound || !underBound) return [];
    const needed = t.atLeast * under.requestsPerSec;
    const rest = (over.dbCpuMs ?? 0) + (over.loadCpuMs ?? 0);
    // What the app may spend in all; its main thread (a share of that, as measured) must also fit one core.
    const threadShare = over.appThreadCpuMs && over.appCpuMs ? over.appThreadCpuMs / over.appCpuMs : 1;
    const appBudgetMs = Math.min(1000 / needed / threadShare, (cores * 1000) / needed - rest);
    const round = (n: number) => Math.round(n * 100) / 100;
    return [
      {
        ratio: t.name,
        measured: round(over.requestsPerSec / Math.max(1, under.requestsPerSec)),
        predicted: round(overBound / underBound),
        appBudgetMs: round(appBudgetMs),
      },
    ];
  });
}

/** What a bare node:http server answering from memory (the "memory" row) reaches, as a ratio to the floor. */
export function ceilingOf(rows: Row[]): number | undefined {
  const memory = rows.find((r) => r.id === "memory");
  const floor = rows.find((r) => r.id === "floor");
  if (!memory || !floor || floor.requestsPerSec <= 0) return undefined;
  return Math.round((memory.requestsPerSec / floor.requestsPerSec) * 100) / 100;
}

function describeModel(model: CpuModel, target: number, row: Row | undefined): string {
  const thread = row?.appThreadCpuMs !== undefined ? ` (main thread ${row.appThreadCpuMs})` : "";
  const spent = `app ${row?.appCpuMs ?? "?"}${thread} + db ${row?.dbCpuMs ?? "?"} + load generator ${row?.loadCpuMs ?? "?"} ms`;
  const room =
    model.appBudgetMs <= 0
      ? `no app could reach ${target} here: PostgreSQL and the load generator alone use up the cores at that rate`
      : `reaching ${target} leaves the app ${model.appBudgetMs} ms of CPU per request (it spends ${row?.appCpuMs ?? "?"})`;
  return `cpu model: ${model.ratio}: measured ${model.measured.toFixed(2)}, CPU per request (${spent}) predicts ${model.predicted.toFixed(2)}; ${room}`;
}

/** Prints the table and the ratios, writes bench-results/; false when a correctness count is wrong. */
export function report(
  rows: Row[],
  appPeakRssMb: number | null,
  profiles: { ratio: string; lines: string[] }[] = [],
): boolean {
  const ratios = ratiosOf(rows);
  const table = [
    "| scenario | req/s | p50 ms | p99 ms | app CPU ms/req | db CPU ms/req | load CPU ms/req | peak RSS MB | correctness |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.requestsPerSec} | ${r.p50Ms} | ${r.p99Ms} | ${r.appCpuMs ?? "?"} | ${r.dbCpuMs ?? "?"} | ${r.loadCpuMs ?? "–"} | ${r.peakRssMb ?? "?"} | ${r.ok ? "✓" : "✗"} ${r.correctness} |`,
    ),
  ].join("\n");
  console.log(`\n${table}\n`);
  for (const ratio of ratios) console.log(describeRatio(ratio));
  for (const row of rows) if (row.runtime) console.log(describeRuntime(row.scenario, row.runtime));
  const models = cpuModelOf(rows);
  for (const model of models) {
    const target = TARGETS.find((t) => t.name === model.ratio);
    if (target)
      console.log(
        describeModel(
          model,
          target.atLeast,
          rows.find((r) => r.id === target.over),
        ),
      );
  }
  const ceiling = ceilingOf(rows);
  if (ceiling !== undefined) {
    console.log(
      `replay ceiling: a bare node:http server answering from memory reaches ${ceiling.toFixed(2)} × the floor in this run (replay target ≥ ${TARGETS.find((t) => t.over.startsWith("replay") && t.under === "floor")?.atLeast})`,
    );
  }
  const callback = rows.find((r) => r.id === "callback-storm");
  if (callback) {
    const met = callback.appCpuMs !== undefined && callback.appCpuMs <= CALLBACK_CPU_TARGET_MS;
    console.log(
      `callback: app CPU per signed notification ${callback.appCpuMs ?? "?"} ms (target ≤ ${CALLBACK_CPU_TARGET_MS}) ${met ? "✓" : "— missed"}`,
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
    cpuModel: models,
    replayCeiling: ceiling ?? null,
    cores: availableParallelism(),
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
        `<tr><td>${escapeHtml(r.scenario)}</td><td>${r.requestsPerSec}</td><td>${r.p50Ms}</td><td>${r.p99Ms}</td><td>${r.appCpuMs ?? "?"}</td><td>${r.dbCpuMs ?? "?"}</td><td>${r.loadCpuMs ?? "–"}</td><td>${r.peakRssMb ?? "?"}</td><td>${r.ok ? "✓" : "✗"} ${escapeHtml(r.correctness)}</td></tr>`,
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
<table><thead><tr><th>scenario</th><th>req/s</th><th>p50 ms</th><th>p99 ms</th><th>app CPU ms/req</th><th>db CPU ms/req</th><th>load CPU ms/req</th><th>peak RSS MB</th><th>correctness</th></tr></thead><tbody>${tableRows}</tbody></table>
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
