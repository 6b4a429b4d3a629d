/**
 * Every write the shoppers made (mutations, MockPay's Confirm), from the first attempt to the answer,
 * retries included: a failover's unavailability is read from the writes it held up.
 */
export interface Write {
  /** What was written (a tRPC path or a page's path). */
  what: string;
  from: number;
  to: number;
  /** An attempt failed (unreachable, 503, 5xx) before the answer came. */
  failed: boolean;
}

export class WriteLog {
  private readonly writes: Write[] = [];

  record(write: Write): void {
    this.writes.push(write);
  }

  /** Every write, for the run's log folder. */
  entries(): readonly Write[] {
    return this.writes;
  }

  /**
   * How a window [from, to] (ms since the epoch) looked to the shoppers: the writes in flight in it that
   * were held up (an attempt failed, or the whole took over `slowMs`) with their waits in seconds, sorted,
   * and the longest time in it during which no write was answered at all.
   */
  during(from: number, to: number, slowMs = 1_000): { held: number[]; longestSilence: number } {
    const inFlight = this.writes.filter((w) => w.to >= from && w.from <= to);
    const held = inFlight
      .filter((w) => w.failed || w.to - w.from > slowMs)
      .map((w) => (w.to - w.from) / 1000)
      .sort((a, b) => a - b);
    const answers = this.writes
      .map((w) => w.to)
      .filter((t) => t >= from)
      .sort((a, b) => a - b);
    let longest = 0;
    let last = from;
    for (const t of answers) {
      longest = Math.max(longest, Math.min(t, to) - last);
      if (t >= to) break;
      last = t;
    }
    return { held, longestSilence: longest / 1000 };
  }
}

/** The value below which a share `p` (0–1) of the sorted `values` fall (nearest rank). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? 0;
}
