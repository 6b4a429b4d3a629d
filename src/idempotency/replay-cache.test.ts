import { describe, expect, it } from "vitest";
import { ReplayCache } from "./replay-cache";

describe("the replay cache's single flight", () => {
  it("a copy waits for the run of its key, but no longer than it may wait", async () => {
    const cache = new ReplayCache();
    let finish: (value: string) => void = () => {};
    const first = cache.once("k", () => new Promise<string>((resolve) => (finish = resolve)));
    // Told at once (the client asked not to wait), or after its wait, that the key is still running.
    expect(await cache.once("k", async () => "second", 0)).toEqual({ ran: false, waitedOut: true });
    expect(await cache.once("k", async () => "second", 20)).toEqual({ ran: false, waitedOut: true });
    // A copy that may wait longer than the run takes is told to look again once it ended.
    const patient = cache.once("k", async () => "second", 5_000);
    finish("first");
    expect(await first).toEqual({ ran: true, value: "first" });
    expect(await patient).toEqual({ ran: false });
    // Nothing running: it runs.
    expect(await cache.once("k", async () => "third", 0)).toEqual({ ran: true, value: "third" });
  });
});
