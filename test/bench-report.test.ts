import { describe, expect, it } from "vitest";
import { htmlReport } from "../scripts/lib/bench/report";
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
