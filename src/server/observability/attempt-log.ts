import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import type { AttemptLayer } from "~/server/db/schema";

export interface Attempt {
  layer: AttemptLayer;
  scope: string;
  subject: string;
  key: string;
  outcome: string;
  /** What answered it instead of running it (none for one that took effect). */
  absorbedBy?: string;
}

interface Tallied extends Attempt {
  second: number;
  count: number;
}

/**
 * Every attempt that reached a layer, counted in memory per (key, layer, outcome, second) and appended as
 * one row each when flushed (readers sum the rows of a second that spans two flushes): a storm of a thousand
 * copies of one request is one row with a count of a thousand, and a replay answered from memory costs the
 * database nothing until the flush (once a second, one statement). The table feeds the order's story ("what happened to this order").
 * Bounded: past `maxEntries` distinct rows waiting, more are counted as dropped, not kept.
 */
export class AttemptLog {
  private tally = new Map<string, Tallied>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastPrune = 0;
  dropped = 0;

  constructor(
    private readonly db: Db,
    private readonly options: { flushMs?: number; maxEntries?: number; keepHours?: number } = {},
  ) {}

  add(attempt: Attempt, at = Date.now()): void {
    const second = Math.floor(at / 1000);
    const id = idOf(attempt, second);
    const known = this.tally.get(id);
    if (known) known.count++;
    else if (this.tally.size >= (this.options.maxEntries ?? 20_000)) this.dropped++;
    else this.tally.set(id, { ...attempt, second, count: 1 });
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        void this.flush().catch(() => {});
      }, this.options.flushMs ?? 1_000);
      this.timer.unref?.();
    }
  }

  /** Writes what was counted since the last flush; on failure it is kept for the next one. */
  async flush(): Promise<number> {
    const taken = [...this.tally.values()];
    this.tally = new Map();
    if (taken.length === 0) return 0;
    try {
      // One statement of eight arrays, whatever the number of rows: building a multi-row VALUES list per
      // flush cost the replay path measurable CPU in the bench.
      const column = <K extends keyof Tallied>(key: K) => taken.map((row) => row[key]);
      await this.db.$client`
        INSERT INTO duplicate_attempt (layer, scope, subject, key, outcome, absorbed_by, second, count)
        SELECT layer, scope, subject, key, outcome, absorbed_by, to_timestamp(second), count
          FROM unnest(${column("layer")}::text[], ${column("scope")}::text[], ${column("subject")}::text[],
                      ${column("key")}::text[], ${column("outcome")}::text[], ${taken.map((row) => row.absorbedBy ?? "")}::text[],
                      ${column("second")}::float8[], ${column("count")}::int[])
               AS t(layer, scope, subject, key, outcome, absorbed_by, second, count)`;
    } catch (error) {
      for (const row of taken) {
        const id = idOf(row, row.second);
        const known = this.tally.get(id);
        if (known) known.count += row.count;
        else if (this.tally.size < (this.options.maxEntries ?? 20_000)) this.tally.set(id, row);
        else this.dropped += row.count;
      }
      throw error;
    }
    // Written: whatever happens to the prune below, these counts are not kept for another flush (they would be
    // added twice: a chaos run once saw an order with two copies that "took effect" after connections dropped).
    if (Date.now() - this.lastPrune > 60_000) {
      this.lastPrune = Date.now();
      await this.db
        .execute(
          sql`DELETE FROM duplicate_attempt WHERE second < now() - ${this.options.keepHours ?? 48} * interval '1 hour'`,
        )
        .catch(() => {});
    }
    return taken.length;
  }
}

const idOf = (a: Attempt, second: number) =>
  `${a.layer}\u0000${a.scope}\u0000${a.subject}\u0000${a.key}\u0000${a.outcome}\u0000${a.absorbedBy ?? ""}\u0000${second}`;
