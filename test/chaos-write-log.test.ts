import { describe, expect, it } from "vitest";
import { percentile, WriteLog } from "../scripts/lib/chaos/write-log";

/** The figures `npm run chaos -- --ha` prints per failover come from here: they must say what happened. */
describe("the chaos run's write log", () => {
  const at = (s: number) => 1_000_000 + s * 1000;

  it("counts the writes a window held up, with their waits, and the longest time nothing was answered", () => {
    const log = new WriteLog();
    // steady writes every 100 ms before the fault…
    for (let t = 0; t < 2; t += 0.1) log.record({ what: "w", from: at(t), to: at(t + 0.05), failed: false });
    // …two writes in flight when it hits, answered 10 s later after failed attempts…
    log.record({ what: "create", from: at(1.95), to: at(12), failed: true });
    log.record({ what: "cancel", from: at(2.05), to: at(12.2), failed: true });
    // …one slow without a failed attempt, and quick ones once it is over.
    log.record({ what: "slow", from: at(12.5), to: at(14), failed: false });
    for (let t = 12.3; t < 20; t += 0.1)
      log.record({ what: "w", from: at(t), to: at(t + 0.05), failed: false });

    const window = log.during(at(2), at(15));
    expect(window.held.map((s) => Math.round(s * 100) / 100)).toEqual([1.5, 10.05, 10.15]);
    expect(window.longestSilence).toBeCloseTo(10, 1);
    // A window nothing touched: no held write, and the silence is only the gap between two answers.
    const calm = log.during(at(16), at(18));
    expect(calm.held).toEqual([]);
    expect(calm.longestSilence).toBeLessThan(0.2);
  });

  it("takes percentiles by nearest rank", () => {
    expect(percentile([], 0.5)).toBe(0);
    expect(percentile([1], 0.5)).toBe(1);
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(percentile([1, 2, 3, 4], 0.99)).toBe(4);
  });
});
