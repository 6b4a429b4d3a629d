import { randomUUID } from "node:crypto";
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

/** One flush's rows under the id that makes writing them twice write them once. */
interface Batch {
  id: string;
  rows: Tallied[];
}

/**
 * Every attempt that reached a layer, counted in memory per (key, layer, outcome, second) and appended as
 * one row each when flushed (readers sum the rows of a second that spans two flushes): a storm of a thousand
 * copies of one request is one row with a count of a thousand, and a replay answered from memory costs the
 * database nothing until the flush (once a second, one statement). The table feeds the order's story ("what
 * happened to this order").
 *
 * A flush is written once, whatever its answer: it carries an id, recorded in `attempt_flush` by the same
 * statement that appends its rows, and a batch whose answer was lost (an error after the commit, as when the
 * primary dies) is sent again as it was, under the same id, so a batch that did commit adds nothing.
 * A batch the database refuses as data (SQLSTATE class 22 or 23) would be refused again: it is dropped and
 * counted in `dropped`, so it never holds up the batches behind it. A write that has not answered within
 * `writeTimeoutMs` is left behind and its batch sent again later (the id makes that safe whichever commits).
 * Bounded: past `maxEntries` rows waiting (counted and unsent), more are counted as dropped, not kept.
 */
export class AttemptLog {
  private tally = new Map<string, Tallied>();
  private unsent: Batch[] = [];
  private unsentRows = 0;
  /** Flushes run one after another: two at once would each send the first unsent batch and drop the second. */
  private flushing: Promise<unknown> = Promise.resolve();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastPrune = 0;
  dropped = 0;

  constructor(
    private readonly db: Db,
    private readonly options: {
      flushMs?: number;
      maxEntries?: number;
      keepHours?: number;
      writeTimeoutMs?: number;
    } = {},
  ) {}

  add(attempt: Attempt, at = Date.now()): void {
    const second = Math.floor(at / 1000);
    const id = idOf(attempt, second);
    const known = this.tally.get(id);
    if (known) known.count++;
    else if (this.tally.size + this.unsentRows >= this.maxEntries) this.dropped++;
    else this.tally.set(id, { ...attempt, second, count: 1 });
    this.schedule();
  }

  /** A flush in `flushMs`, unless one is due already; a flush that fails schedules the next one itself. */
  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush().catch(() => this.schedule());
    }, this.options.flushMs ?? 1_000);
    this.timer.unref?.();
  }

  /**
   * Writes the batches whose answer never came, then what was counted since; returns the rows written. A batch
   * that fails is kept as it is, for the next flush.
   */
  flush(): Promise<number> {
    const flushed = this.flushing.catch(() => {}).then(() => this.flushInTurn());
    this.flushing = flushed;
    return flushed;
  }

  private async flushInTurn(): Promise<number> {
    if (this.tally.size > 0) {
      this.unsent.push({ id: randomUUID(), rows: [...this.tally.values()] });
      this.unsentRows += this.tally.size;
      this.tally = new Map();
    }
    let written = 0;
    while (this.unsent[0]) {
      const batch = this.unsent[0];
      try {
        await this.write(batch);
        written += batch.rows.length;
      } catch (error) {
        if (!refusedAsData(error)) throw error;
        this.dropped += batch.rows.reduce((sum, row) => sum + row.count, 0);
      }
      this.unsent.shift();
      this.unsentRows -= batch.rows.length;
    }
    if (written > 0 && Date.now() - this.lastPrune > 60_000) {
      this.lastPrune = Date.now();
      const hours = this.options.keepHours ?? 48;
      await this.db.$client`
        WITH pruned AS (DELETE FROM attempt_flush WHERE at < now() - ${hours} * interval '1 hour')
        DELETE FROM duplicate_attempt WHERE second < now() - ${hours} * interval '1 hour'`.catch(() => {});
    }
    return written;
  }

  /**
   * One statement of eight arrays, whatever the number of rows (a multi-row VALUES list per flush costs the
   * replay path measurable CPU), appended only when the batch's id is new.
   */
  private async write({ id, rows }: Batch): Promise<void> {
    // PostgreSQL's text holds no NUL, and a key is whatever a client sent.
    const column = <K extends keyof Tallied>(key: K) =>
      rows.map((row) =>
        typeof row[key] === "string" ? (row[key] as string).replaceAll("\0", "\uFFFD") : row[key],
      );
    const written = this.db.$client`
      WITH flush AS (INSERT INTO attempt_flush (id) VALUES (${id}) ON CONFLICT (id) DO NOTHING RETURNING id)
      INSERT INTO duplicate_attempt (layer, scope, subject, key, outcome, absorbed_by, second, count)
      SELECT layer, scope, subject, key, outcome, absorbed_by, to_timestamp(second), count
        FROM unnest(${column("layer")}::text[], ${column("scope")}::text[], ${column("subject")}::text[],
                    ${column("key")}::text[], ${column("outcome")}::text[], ${column("absorbedBy").map((v) => v ?? "")}::text[],
                    ${column("second")}::float8[], ${column("count")}::int[])
             AS t(layer, scope, subject, key, outcome, absorbed_by, second, count)
       WHERE EXISTS (SELECT FROM flush)`;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error("attempt log write did not answer in time")),
        this.options.writeTimeoutMs ?? 30_000,
      );
    });
    written.catch(() => {});
    try {
      await Promise.race([written, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private get maxEntries(): number {
    return this.options.maxEntries ?? 20_000;
  }
}

/** The database refused the statement's data (class 22) or a constraint (class 23): sending it again cannot work. */
const refusedAsData = (error: unknown) => /^2[23]/.test(String((error as { code?: unknown })?.code ?? ""));

const idOf = (a: Attempt, second: number) =>
  `${a.layer}\u0000${a.scope}\u0000${a.subject}\u0000${a.key}\u0000${a.outcome}\u0000${a.absorbedBy ?? ""}\u0000${second}`;
