import { describe, expect, it } from "vitest";
import { ReplayCache } from "./replay-cache";

describe("the replay cache's single flight", () => {
  it("a copy waits for the run of its key, but no longer than it may wait", async () => {
    const cache = new ReplayCache();
    const first = cache.board("k");
    if (!("land" in first)) throw new Error("the first call leads the flight");
    // Told at once (the client asked not to wait), or after its wait, that the key is still running.
    const impatient = cache.board("k", 0);
    expect("landed" in impatient && (await impatient.landed)).toBe(false);
    const briefly = cache.board("k", 20);
    expect("landed" in briefly && (await briefly.landed)).toBe(false);
    // A copy that may wait longer than the run takes is told to look again once it ended.
    const patient = cache.board("k", 5_000);
    if (!("landed" in patient)) throw new Error("the key is running");
    first.land();
    expect(await patient.landed).toBe(true);
    // Nothing running: it leads.
    expect("land" in cache.board("k", 0)).toBe(true);
  });
});

describe("renderings (known replays)", () => {
  const small = () =>
    new ReplayCache({
      maxEntries: 10,
      maxChars: 10_000,
      marginMs: 0,
      maxRenderings: 2,
      maxRenderingChars: 100,
    });
  const success = (fingerprint: string, status: "SUCCESS" | "FAILED" = "SUCCESS") => ({
    fingerprint,
    status,
    responseBody: { ok: true },
    answerVersion: 1,
    bizId: null,
    expiresAt: new Date(Date.now() + 60_000),
  });

  it("keeps a rendering only for the request the key's success was for, and serves it for that text alone", () => {
    const cache = new ReplayCache();
    cache.put("k", success("f1"), performance.now(), 60_000, 10);
    cache.keepRendering("k", "f2", "text", "another request's", 10);
    expect(cache.rendered("k", "text")).toBeUndefined();
    cache.keepRendering("k", "f1", "text", "answer", 6);
    expect(cache.rendered("k", "text")?.rendering).toBe("answer");
    expect(cache.rendered("k", "other text")).toBeUndefined();
    // No entry, or a refusal: nothing kept.
    cache.keepRendering("absent", "f1", "text", "answer", 6);
    expect(cache.rendered("absent", "text")).toBeUndefined();
    cache.put("refused", success("f1", "FAILED"), performance.now(), 60_000, 10);
    cache.keepRendering("refused", "f1", "text", "answer", 6);
    expect(cache.rendered("refused", "text")).toBeUndefined();
  });

  it("bounded: a few texts per key, none too large, and counted in the cache's size", () => {
    const cache = small();
    cache.put("k", success("f"), performance.now(), 60_000, 10);
    cache.keepRendering("k", "f", "a", "1", 1);
    cache.keepRendering("k", "f", "b", "2", 1);
    cache.keepRendering("k", "f", "c", "3", 1);
    cache.keepRendering("k", "f", "d".repeat(100), "4", 1);
    expect(["a", "b", "c"].map((text) => cache.rendered("k", text)?.rendering)).toEqual([
      "1",
      "2",
      undefined,
    ]);
    expect(cache.get("k")?.size).toBe("k".length + 10 + 64 + 2 * (2 + 64));
  });

  it("served no longer than the outcome itself", async () => {
    const cache = small();
    cache.put("k", success("f"), performance.now(), 30, 10);
    cache.keepRendering("k", "f", "text", "answer", 6);
    expect(cache.rendered("k", "text")?.rendering).toBe("answer");
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(cache.rendered("k", "text")).toBeUndefined();
    expect(cache.get("k")).toBeUndefined();
  });
});
