import pino from "pino";
import { describe, expect, it } from "vitest";
import { every } from "./periodic";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("every", () => {
  it("never overlaps runs, and gives up on a run that hangs so the loop goes on", async () => {
    const log = pino({ level: "silent" });
    let started = 0;
    let finished = 0;
    const timer = every(
      10,
      async () => {
        started++;
        // The first run hangs forever, as a query on a dead connection can.
        if (started === 1) return new Promise(() => {});
        await sleep(30);
        finished++;
      },
      { name: "test", log, deadlineMs: 100 },
    );
    await sleep(80);
    expect(started).toBe(1); // waiting on the hung run, not piling up
    await sleep(200);
    clearInterval(timer);
    expect(started).toBeGreaterThan(1);
    expect(finished).toBeGreaterThan(0);
    expect(finished).toBeLessThanOrEqual(started - 1);
  });
});
