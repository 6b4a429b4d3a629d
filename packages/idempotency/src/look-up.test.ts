import { describe, expect, it, vi } from "vitest";
import { claimed } from "./claim";
import { throughCache } from "./look-up";
import { refusalStored } from "./outcome";
import { cacheKeyOf, ReplayCache } from "./replay-cache";
import { type Call, DEFAULT_IDEMPOTENCY_CONFIG, type IdempotentOperation, type RecordStore } from "./types";

// The claim, played by each test: what the look-up phase keeps of what it throws is the question here.
vi.mock("./claim", () => ({ claimed: vi.fn() }));
const claims = (thrown: unknown) => vi.mocked(claimed).mockRejectedValueOnce(thrown);

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
    claims(refusalStored(op, refusal, held(), new Error("cause")));
    await expect(throughCache(cache, call)).rejects.toMatchObject({ code: "OUT_OF_STOCK" });
    expect(cache.get(cacheKeyOf("shopper", "test.look-up", "mine"))?.status).toBe("FAILED");
  });

  it("a refusal about another key, thrown by the operation's own code, is not kept under this one", async () => {
    const cache = new ReplayCache();
    const call = callOf(operation("mine"));
    const nested = refusalStored(operation("another"), refusal, held(), new Error("cause"));
    claims(nested);
    await expect(throughCache(cache, call)).rejects.toBe(nested);
    expect(cache.get(cacheKeyOf("shopper", "test.look-up", "mine"))).toBeUndefined();
  });
});
