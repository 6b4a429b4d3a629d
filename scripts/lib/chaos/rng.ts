import { unsafeUniformIntDistribution, xoroshiro128plus } from "pure-rand";

/**
 * A seeded random source (pure-rand's xoroshiro128+). Every shopper draws from
 * its own stream, derived from the run's seed and its index, so the plan of a
 * seed — who double-clicks, whose answer is lost, who refunds — is the same on
 * every run whatever the timing.
 */
export class Rng {
  private readonly generator;

  constructor(seed: number) {
    this.generator = xoroshiro128plus(seed | 0);
  }

  /** An independent stream for one participant of the run. */
  static forParticipant(seed: number, index: number): Rng {
    return new Rng(Math.imul(seed ^ 0x5bd1e995, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b));
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return unsafeUniformIntDistribution(min, max, this.generator);
  }

  chance(probability: number): boolean {
    return this.int(0, 999_999) < probability * 1_000_000;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[this.int(0, items.length - 1)] as T;
  }

  /** A key, as a client would make one: deterministic for the seed. */
  key(prefix: string): string {
    const hex = () => this.int(0, 0xffff).toString(16).padStart(4, "0");
    return `${prefix}-${hex()}${hex()}-${hex()}-${hex()}${hex()}`;
  }
}
