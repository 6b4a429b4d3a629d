import { describe, expect, it } from "vitest";
import { throughCache } from "./look-up";
import { refusalStored } from "./outcome";
import { cacheKeyOf, ReplayCache } from "./replay-cache";
import { type Call, DEFAULT_IDEMPOTENCY_CONFIG, type IdempotentOperation, type RecordStore } from "./types";

const operation = (key: string): IdempotentOperation<string, unknown> => ({
  scope: "shopper",
  bizType: "test.look-up",
  key,
  request: {},
  execute: async () => ({ result: "done" }),
});

const callOf = (op: IdempotentOperation<string, unknown>): Call<string, unknown> => ({
  store: {} as RecordStore<unknown>,
  op,
  requestFingerprint: "fp",
  config: DEFAULT_IDEMPOTENCY_CONFIG,
  trace: { waited: false },
});

const held = () => ({
  expiresAt: new Date(Date.now() + 60_000),
  remainingMs: 60_000,
  askedAt: performance.now(),
});
const refusal = { code: "OUT_OF_STOCK", message: "out of stock" };

describe("the look-up phase keeps what a call learnt, in one place", () => {
  it("a refusal stored under the call's own key is kept", async () => {
    const cache = new ReplayCache();
    const op = operation("mine");
    const call = callOf(op);
    await expect(
      throughCache(cache, call, async () => {
        throw refusalStored(op, refusal, held(), new Error("cause"));
      }),
    ).rejects.toMatchObject({ code: "OUT_OF_STOCK" });
    expect(cache.get(cacheKeyOf("shopper", "test.look-up", "mine"))?.status).toBe("FAILED");
  });

  it("a refusal about another key, thrown by the operation's own code, is not kept under this one", async () => {
    const cache = new ReplayCache();
    const call = callOf(operation("mine"));
    const nested = refusalStored(operation("another"), refusal, held(), new Error("cause"));
    await expect(
      throughCache(cache, call, async () => {
        throw nested;
      }),
    ).rejects.toBe(nested);
    expect(cache.get(cacheKeyOf("shopper", "test.look-up", "mine"))).toBeUndefined();
  });
});
