import { describe, expect, it } from "vitest";
import { OPERATIONS } from "~/server/all-operations";
import { CONSUMERS } from "~/server/fulfilment/consumers";
import { ACTOR_KINDS, PAIRS } from "../scripts/lib/interleavings/pairs";

/** The permutation harness's pairs (npm run interleavings) cover every actor the app has. */
describe("npm run interleavings: its pairs", () => {
  it("name every operation and every consumer the app has among the actors that touch an order", () => {
    const kinds = new Set<string>(ACTOR_KINDS);
    const missing = [
      ...OPERATIONS.map((operation) => operation.name),
      ...CONSUMERS.map((consumer) => `consumer:${consumer.name}`),
    ].filter((name) => !kinds.has(name));
    expect(missing).toEqual([]);
  });

  it("put every actor against another, at least once", () => {
    const covered = new Set(PAIRS.flatMap((pair) => pair.covers));
    expect(ACTOR_KINDS.filter((kind) => !covered.has(kind))).toEqual([]);
  });

  it("each run two or three actors, under names of their own", () => {
    for (const pair of PAIRS) {
      expect(pair.actors.length).toBeGreaterThanOrEqual(2);
      expect(pair.actors.length).toBeLessThanOrEqual(3);
      expect(new Set(pair.actors.map((actor) => actor.name)).size).toBe(pair.actors.length);
    }
    expect(new Set(PAIRS.map((pair) => pair.name)).size).toBe(PAIRS.length);
  });
});
