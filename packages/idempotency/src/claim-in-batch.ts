import { type Attempt, attempt, claimInTransaction } from "./claim-in-transaction";
import { guard } from "./errors";
import { firstAnswer } from "./outcome";
import { hasCode, LOCK_NOT_AVAILABLE } from "./postgres";
import { claimInTransactionStatement, storeInTransactionStatement } from "./record";
import type { Answered, BatchConfig, Call, ExecuteResult, RecordStore } from "./types";

/**
 * Several first executions in one transaction (docs/idempotency.md, "Batches"): one commit, and k + 1 round
 * trips for k calls instead of 2k. A call of an operation declared `batchable` comes here only when other such
 * calls are in flight beside it (claim.ts chooses); each of at most `runners` runners takes up to `maxSize` of the
 * calls waiting at a time onto one connection:
 *
 *   BEGIN, and a lock_timeout of BATCH_CLAIM_WAIT_MS for the whole transaction (one message)
 *   for each call, in key order, one round trip:
 *     SAVEPOINT, the claim, the business statements
 *     then, sent with the next call's: the outcome (UPDATE), or ROLLBACK TO the savepoint and RELEASE
 *   COMMIT
 *
 * A kept call's savepoint is not released: the next call's sits inside it (at most `maxSize` deep), ROLLBACK
 * TO names the newest of that name, the call's own, and COMMIT ends them all with the transaction. Each kept
 * call holds one of the backend's 64 cached subtransaction ids until COMMIT, as a released one would.
 *
 * Nothing of a call is seen by anyone before COMMIT, as with a call alone. A call that cannot be settled
 * inside the batch leaves it at once, rolled back to its savepoint, and is settled alone (claim-in-transaction.ts):
 * - its claim found the key taken, or would have waited for a holder (a duplicate never holds a batch up);
 * - its business statements would have waited for a lock: alone, they wait as long as they need (batchable
 *   operations lock nothing another call holds, so this is rare: a table growing, say);
 * - its business statements failed: a declared refusal is stored, anything else frees the key (`failed`).
 * If the batch's transaction fails as a whole (its COMMIT, a lost connection), every call that was in it
 * fails with that error, and none of its writes stay. One failure is the batch's own doing: a kept call's
 * outcome (its UPDATE, sent after the call's statements) waited past the batch's lock_timeout (the table being
 * extended under load, say). It breaks the transaction outside any call's savepoint, so nothing stays, and
 * every call runs alone instead.
 *
 * A batch of one is one attempt of a call alone (./claim-in-transaction.ts, attempt), made on the runner: the
 * same statements and round trips, except that its claim waits for no other holder; what it comes to is settled
 * by claimInTransaction, off the runner.
 */

/** How long a claim on a runner waits for another holder of its key before leaving (to wait elsewhere). */
export const BATCH_CLAIM_WAIT_MS = 5;
/** The batch's first message (the simple protocol: two statements, no parameters). */
const BATCH_BEGIN = `BEGIN; SET LOCAL lock_timeout = '${BATCH_CLAIM_WAIT_MS}ms'`;
/** A call that is not kept: nothing of it stays, nor its savepoint (one message). */
const ROLLBACK_TO_SAVEPOINT = "ROLLBACK TO SAVEPOINT batched; RELEASE SAVEPOINT batched";

/** A call in the next batch; what the batch could not settle is settled alone. */
export async function claimInBatch<T, Tx>(call: Call<T, Tx>, config: BatchConfig): Promise<Answered<T>> {
  const answer = await batcherOf(call.store, config).submit(call);
  return claimInTransaction(call, answer.kind === "alone" || answer.kind === "held" ? undefined : answer);
}

/** What a call learnt on a runner: an attempt's result, or "alone" (nothing of it happened: run it alone). */
type BatchAnswer<T> = Attempt<T> | { kind: "alone" };

interface Waiting {
  call: Call<unknown, unknown>;
  settle: (answer: BatchAnswer<unknown>) => void;
}

/** Counts, for tests and the bench: calls handed to the runners, and the batches (of two or more) they made. */
export interface BatchStats {
  /** Calls handed to the runners, a batch of one included. */
  submitted: number;
  batches: number;
  calls: number;
  largest: number;
}

class Batcher {
  private readonly waiting: Waiting[] = [];
  private running = 0;

  constructor(
    private readonly store: RecordStore<unknown>,
    private readonly config: BatchConfig,
    private readonly stats: BatchStats,
  ) {}

  submit<T, Tx>(call: Call<T, Tx>): Promise<BatchAnswer<T>> {
    this.stats.submitted++;
    return new Promise((settle) => {
      this.waiting.push({ call: call as Call<unknown, unknown>, settle: settle as Waiting["settle"] });
      this.pump();
    });
  }

  private pump() {
    while (this.running < this.config.runners && this.waiting.length > 0) {
      const taken = this.waiting.splice(0, this.config.maxSize);
      this.running++;
      this.run(taken).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async run(taken: Waiting[]) {
    try {
      const [only] = taken;
      if (taken.length === 1 && only) {
        only.settle(await attempt(only.call, BATCH_CLAIM_WAIT_MS));
        return;
      }
      this.stats.batches++;
      this.stats.calls += taken.length;
      this.stats.largest = Math.max(this.stats.largest, taken.length);
      // Key order: two batches that share keys take them in the same order.
      taken.sort((a, b) => compareKeys(a.call, b.call));
      const answers = await runBatch(this.store, taken);
      taken.forEach((waiting, i) => {
        waiting.settle(answers[i] ?? { kind: "alone" });
      });
    } catch (error) {
      // Not expected (every statement's failure is caught where it is sent); no call is left waiting on it.
      for (const waiting of taken) waiting.settle({ kind: "failed", error });
    }
  }
}

function compareKeys(a: Call<unknown, unknown>, b: Call<unknown, unknown>): number {
  const x = `${a.op.scope}\u0000${a.op.bizType}\u0000${a.op.key}`;
  const y = `${b.op.scope}\u0000${b.op.bizType}\u0000${b.op.key}`;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The batch's short lock_timeout ran out (lock_not_available), wherever in the error's causes it shows. */
const waitedForLock = (error: unknown) => hasCode(error, (code) => code === LOCK_NOT_AVAILABLE);

/** A statement's outcome, caught the moment it settles (a batch awaits some only at COMMIT). */
type Settled<R> = Promise<{ ok: true; value: R } | { ok: false; error: unknown }>;
function settled<R>(statement: PromiseLike<R>): Settled<R> {
  return Promise.resolve(statement).then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/** The first statement of `after` that failed (they are answered in the order sent), or `otherwise`. */
async function firstFailure(after: Settled<unknown>[], otherwise: unknown): Promise<unknown> {
  for (const result of await Promise.all(after)) if (!result.ok) return result.error;
  return otherwise;
}

interface Kept {
  index: number;
  row: { record_id: string | number; expires_at: string | Date };
  executed: ExecuteResult<unknown>;
  /** The answer as stored. */
  text: string;
}

async function runBatch(store: RecordStore<unknown>, taken: Waiting[]): Promise<BatchAnswer<unknown>[]> {
  const answers: BatchAnswer<unknown>[] = taken.map(() => ({ kind: "alone" }));
  let conn: Awaited<ReturnType<RecordStore<unknown>["hold"]>>;
  try {
    conn = await guard(() => store.hold());
  } catch (error) {
    return taken.map(() => ({ kind: "failed", error }));
  }
  const { sql } = conn;
  // The replay cache's clock for every kept call: each key expires ttl after now(), which is the BEGIN's
  // moment for the whole transaction, so the clock is read before BEGIN is sent, not before the call's claim.
  const askedAt = performance.now();
  // Statements awaited only at the end: any failure among them fails the whole batch.
  const after: Settled<unknown>[] = [settled(sql.unsafe(BATCH_BEGIN).execute())];
  const kept: Kept[] = [];
  let ended = false;
  try {
    for (const [index, { call }] of taken.entries()) {
      const { op, config, requestFingerprint } = call;
      const [savepoint, claimed, executed] = await Promise.all([
        settled(sql`SAVEPOINT batched`.execute()),
        settled(
          claimInTransactionStatement(store, sql, op, requestFingerprint, config, {
            lockTimeoutBack: false,
          }).execute(),
        ),
        settled(op.execute(conn.tx)),
      ]);
      // The transaction itself is broken (an earlier statement failed, or the connection is gone): say which.
      if (!savepoint.ok) throw await firstFailure(after, savepoint.error);
      const row = claimed.ok ? claimed.value[0] : undefined;
      if (row && executed.ok) {
        const body = JSON.stringify(executed.value.result ?? null);
        const bizId = executed.value.bizId ?? null;
        after.push(
          settled(storeInTransactionStatement(store, sql, op, row.record_id, body, bizId).execute()),
        );
        kept.push({ index, row, executed: executed.value, text: body });
      } else {
        // Released too (one message): the savepoint ROLLBACK TO keeps would otherwise be given a transaction id
        // when the next call's claim writes inside it, and hold a slot of the backend's 64 subtransaction ids.
        after.push(settled(sql.unsafe(ROLLBACK_TO_SAVEPOINT).execute()));
        // A claim that failed: the key is taken or held; alone, it waits and replays. A claim that
        // held but whose business statements failed: the call's own failure, settled as a call alone settles it
        // (unless they only waited too long for a lock: then nothing happened, and alone they may wait).
        if (claimed.ok && !executed.ok && !waitedForLock(executed.error)) {
          answers[index] = { kind: "failed", error: executed.error };
        }
      }
    }
    // Nothing kept (every call left or failed): nothing to commit.
    after.push(settled(kept.length > 0 ? sql`COMMIT`.execute() : sql`ROLLBACK`.execute()));
    const results = await Promise.all(after);
    ended = true;
    const failed = results.find((r) => !r.ok);
    if (failed && !failed.ok) throw failed.error;
  } catch (error) {
    // Nothing of the batch stays. When what broke it was the batch's own short lock_timeout (a kept call's
    // outcome, its UPDATE, waited for a lock: a relation being extended under load, say), every call runs
    // alone, as if it had left the batch; anything else fails every call the batch would have answered.
    const alone = waitedForLock(error);
    for (const { index } of kept) answers[index] = alone ? { kind: "alone" } : { kind: "failed", error };
    await conn.close({ ended });
    return answers;
  }
  await conn.close({ ended: true });
  for (const { index, row, executed, text } of kept) {
    const call = taken[index]?.call;
    if (!call) continue;
    const held = { expiresAt: new Date(row.expires_at), remainingMs: call.config.ttlMs, askedAt };
    answers[index] = {
      kind: "done",
      answered: firstAnswer(call.op, executed.result, executed.bizId ?? null, held, text),
    };
  }
  return answers;
}

/** Per store (one pool), a batcher per batch config (an app has one), and the store's counts. */
const batchers = new WeakMap<
  RecordStore<unknown>,
  { stats: BatchStats; by: WeakMap<BatchConfig, Batcher> }
>();

/** The batcher of a store under a config, made on first use. */
function batcherOf(store: RecordStore<unknown>, config: BatchConfig): Batcher {
  let ofStore = batchers.get(store);
  if (!ofStore) {
    ofStore = { stats: { submitted: 0, batches: 0, calls: 0, largest: 0 }, by: new WeakMap() };
    batchers.set(store, ofStore);
  }
  let batcher = ofStore.by.get(config);
  if (!batcher) {
    batcher = new Batcher(store, config, ofStore.stats);
    ofStore.by.set(config, batcher);
  }
  return batcher;
}

/** How many batches ran on a store, and how many calls they took (tests, the bench). */
export function batchStats(store: RecordStore<unknown>): BatchStats {
  return { ...(batchers.get(store)?.stats ?? { submitted: 0, batches: 0, calls: 0, largest: 0 }) };
}
