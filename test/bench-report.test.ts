import { describe, expect, it } from "vitest";
import {
  ceilingOf,
  cpuBound,
  cpuModelOf,
  describeRatio,
  htmlReport,
  type Ratio,
  ratiosOf,
} from "../scripts/lib/bench/report";
import { describeRuntime } from "../scripts/lib/bench/runtime";
import type { Row } from "../scripts/lib/bench/settings";

describe("the benchmark's HTML report", () => {
  it("draws each scenario's latency distribution with uPlot, inlined, and escapes what it prints", () => {
    const curve = [1, 50, 99].map((percentile) => ({ percentile, ms: percentile / 10 + 1 }));
    const rows: Row[] = [
      {
        id: "floor",
        scenario: "1 floor",
        requestsPerSec: 1400,
        p50Ms: 3,
        p99Ms: 9,
        peakRssMb: 80,
        correctness: "ok",
        ok: true,
        latency: curve,
      },
      {
        id: "x",
        scenario: "2 <script>",
        requestsPerSec: 0,
        p50Ms: 0,
        p99Ms: 0,
        peakRssMb: null,
        correctness: "a & b",
        ok: true,
      },
    ];
    const html = htmlReport("2026-12-04T10:00:00Z", rows, [], 290);
    // uPlot itself travels inside the file (the report opens offline).
    expect(html).toMatch(/var uPlot=function|uPlot=function/);
    expect(html).toContain('"label":"1 floor"');
    expect(html).toContain('"percentiles":[1,50,99]');
    // Only scenarios with latencies become curves; names are escaped in the markup.
    expect(html).not.toContain('"label":"2 <script>"');
    expect(html).toContain("2 &lt;script&gt;");
    expect(html).toContain("a &amp; b");
  });
});

describe("the benchmark's CPU model", () => {
  const row = (
    id: string,
    requestsPerSec: number,
    appCpuMs: number,
    dbCpuMs: number,
    loadCpuMs: number,
  ): Row => ({
    id,
    scenario: id,
    requestsPerSec,
    appCpuMs,
    dbCpuMs,
    loadCpuMs,
    p50Ms: 1,
    p99Ms: 2,
    peakRssMb: 100,
    correctness: "ok",
    ok: true,
  });

  it("bounds a row by the shared cores and by each single-threaded process", () => {
    // 2 cores over 1 ms in all: 2,000/s; the app alone at 0.8 ms caps it at 1,250/s.
    expect(cpuBound({ appCpuMs: 0.8, dbCpuMs: 0.1, loadCpuMs: 0.1 }, 2)).toBe(1250);
    expect(cpuBound({ appCpuMs: 0.2, dbCpuMs: 0.6, loadCpuMs: 0.2 }, 2)).toBe(2000);
    expect(cpuBound({}, 2)).toBeUndefined();
    // Only the app's main thread is single: with 0.5 of its 0.8 ms there, the shared cores bound it first.
    expect(cpuBound({ appCpuMs: 0.8, appThreadCpuMs: 0.5, dbCpuMs: 0.1, loadCpuMs: 0.1 }, 2)).toBe(2000);
  });

  it("predicts each ratio from CPU per request and says how much app CPU its target leaves", () => {
    const rows = [
      row("floor", 1000, 0.4, 0.6, 0.2), // bound: 2,000 / 1.2 = 1,667/s
      row("first-trpc", 400, 2, 0.9, 0.2), // bound: the app's thread, 500/s
      row("replay-rest", 2500, 0.3, 0, 0.2), // bound: the app's thread, 3,333/s
    ];
    const models = cpuModelOf(rows, 2);
    const first = models.find((m) => m.ratio.startsWith("first execution over tRPC"));
    expect(first).toEqual({
      ratio: "first execution over tRPC / floor",
      measured: 0.4,
      predicted: 0.3,
      // 900/s needs ≤ 1.11 ms on one thread, and ≤ 2.22 − 1.1 = 1.12 ms of the shared cores.
      appBudgetMs: 1.11,
    });
    const replay = models.find((m) => m.ratio.startsWith("replay over REST"));
    // 4,000/s leaves 0.5 − 0.2 = 0.3 ms of the cores for the app; 0.25 ms on its own thread.
    expect(replay).toMatchObject({ measured: 2.5, predicted: 2, appBudgetMs: 0.25 });
    // A main thread doing half the app's work may be given twice the one-thread budget (then the cores bind).
    const threaded = cpuModelOf(
      [rows[0] as Row, { ...row("replay-rest", 2500, 0.3, 0, 0.2), appThreadCpuMs: 0.15 }],
      2,
    );
    expect(threaded[0]).toMatchObject({ predicted: 2.4, appBudgetMs: 0.3 });
    // Rows that were not measured give no model.
    expect(models.some((m) => m.ratio.startsWith("replay over tRPC"))).toBe(false);
  });

  it("gives the replay ceiling as the memory row over the floor, when both were measured", () => {
    expect(ceilingOf([row("floor", 1000, 0.4, 0.6, 0.2), row("memory", 3150, 0.2, 0, 0.1)])).toBe(3.15);
    expect(ceilingOf([row("floor", 1000, 0.4, 0.6, 0.2)])).toBeUndefined();
  });
});

describe("the benchmark's ratios, round by round", () => {
  const row = (id: string, requestsPerSec: number, rounds?: number[]): Row => ({
    id,
    scenario: id,
    requestsPerSec,
    ...(rounds ? { rounds } : {}),
    p50Ms: 1,
    p99Ms: 2,
    peakRssMb: 100,
    correctness: "ok",
    ok: true,
  });

  it("prints each round's ratio and the worst, and holds a must on the worst round", () => {
    // Over the run 1.03, but the third round collapsed to 0.38.
    const rows = [row("first-rest", 1030, [1000, 1000, 380]), row("peer-first", 1000, [960, 920, 1000])];
    const ratio = ratiosOf(rows).find((r) => r.name === "first execution over REST / peer");
    expect(ratio).toMatchObject({ value: 1.03, rounds: [1.04, 1.09, 0.38], min: 0.38, met: false });
    expect(describeRatio(ratio as Ratio)).toBe(
      "ratio: first execution over REST / peer 1.03 (rounds 1.04 / 1.09 / 0.38, min 0.38) (target ≥ 0.8, on the min) — missed",
    );
  });

  it("holds a must on the run's value where the rows were not measured in the same rounds", () => {
    const rows = [row("first-rest", 900, [900, 900]), row("peer-first", 1000)];
    expect(ratiosOf(rows).find((r) => r.name === "first execution over REST / peer")).toMatchObject({
      value: 0.9,
      min: 0.9,
      met: true,
    });
  });
});

describe("the app's runtime, round by round", () => {
  it("says each round's event-loop delay and GC, and a round it could not read", () => {
    expect(
      describeRuntime("6 replay, REST", [
        { eventLoopP99Ms: 3.1, eventLoopMaxMs: 12, gcMs: 40.5, gcPauses: 12 },
        undefined,
      ]),
    ).toBe(
      "runtime: 6 replay, REST: round 1: event loop p99 3.1 ms, max 12 ms, GC 40.5 ms in 12 pauses; round 2: not read",
    );
  });
});
