import type postgres from "postgres";
import { executeUnderLease, sleep } from "./claim-with-lease";
import { guard, inProgress, unavailableIfTransient } from "./errors";
import { decideOnRecord } from "./existing-record";
import { firstAnswer, refusalStored, replayStored } from "./outcome";
import { LOCK_NOT_AVAILABLE, pipelined, UNIQUE_VIOLATION } from "./postgres";
import {
  claimInTransactionStatement,
  insertRefusal,
  type RecordRow,
  readRecord,
  recordStatement,
  release,
  storeInTransactionStatement,
} from "./record";
import type { Answered, Call } from "./types";

/**
 * The claim as a row of the business transaction, for an operation whose effects are all in this database,
 * in one transaction and as few round trips as the rules allow:
 *
 *   1  BEGIN with lock_timeout for the claim (one message), the claim (a plain INSERT, which puts
 *      lock_timeout back as it returns), and the business transaction's first statement, all sent together
 *   …  the rest of the business statements
 *   n  the outcome (an UPDATE of the row the claim inserted) and COMMIT, sent together
 *
 * A duplicate's claim waits on the unique index until this transaction ends, then fails (the key is
 * taken: its transaction is aborted, so the business statements behind the claim did nothing) and it
 * reads the stored outcome; a claim that outlasts the wait is REQUEST_IN_PROGRESS. A holder that
 * crashes, or loses its connection, simply aborts: no claim is left behind, no lease needed. A holder
 * that hangs inside its transaction is ended by the pool's idle_in_transaction_session_timeout.
 *
 * `attempt` is one such transaction; `claimInTransaction` tries until the key's answer is known. A batch
 * (./claim-in-batch.ts) makes the same attempts, several in one transaction, and hands what it cannot
 * settle to `claimInTransaction`.
 */

/** What one attempt came to. Nothing of it stays unless it is `done` (or its COMMIT was sent and the answer lost). */
export type Attempt<T> =
  /** The claim held and the business writes committed with the outcome. */
  | { kind: "done"; answered: Answered<T> }
  /** The key was taken: what its holder stored (undefined: freed since). */
  | { kind: "taken"; existing: RecordRow | undefined }
  /** The claim waited for another holder of the key longer than it was allowed to. */
  | { kind: "held" }
  /** The business writes (or a statement of the transaction) failed. */
  | { kind: "failed"; error: unknown };

/**
 * The claim, the business writes and the outcome in one transaction on a connection of the call's own. The
 * claim waits up to `claimWaitMs` for another transaction inserting the same key.
 */
export async function attempt<T, Tx>(call: Call<T, Tx>, claimWaitMs: number): Promise<Attempt<T>> {
  const { store, op, config, requestFingerprint } = call;
  const conn = await guard(() => store.hold());
  const askedAt = performance.now();
  let ended = false;
  try {
    const [began, claimed, executed] = await Promise.allSettled([
      // BEGIN and the claim's lock_timeout in one message (the simple protocol: no parameters, so the wait is
      // written as a whole number), with the database's clock just before the claim: a holder that finished
      // after it made this one wait.
      conn.sql
        .unsafe<[postgres.Row[], { started: number }[]]>(
          `BEGIN; SELECT set_config('lock_timeout', '${Math.ceil(claimWaitMs)}ms', true), extract(epoch FROM clock_timestamp())::float8 AS started`,
        )
        .execute(),
      // The claim puts the lock_timeout back as it returns: the business statements behind it are not bound by it.
      claimInTransactionStatement(store, conn.sql, op, requestFingerprint, config, {
        lockTimeoutBack: true,
      }).execute(),
      op.execute(conn.tx),
    ]);
    if (began.status === "rejected") return { kind: "failed", error: began.reason };
    if (claimed.status === "rejected") {
      const code = (claimed.reason as { code?: string }).code;
      if (code === LOCK_NOT_AVAILABLE) return { kind: "held" };
      if (code !== UNIQUE_VIOLATION) return { kind: "failed", error: claimed.reason };
      // The key is taken and the transaction aborted: end it and read what the holder stored, together.
      const [, [existing]] = await pipelined([
        conn.sql`ROLLBACK`.execute(),
        recordStatement(store, conn.sql, op),
      ]);
      ended = true;
      const started = began.value[1][0]?.started;
      if (existing && started !== undefined && existing.finished > started) {
        call.trace.waited = true;
        call.trace.by = "claim";
      }
      return { kind: "taken", existing: existing ? { ...existing, askedAt } : undefined };
    }
    if (executed.status === "rejected") return { kind: "failed", error: executed.reason };
    const [row] = claimed.value;
    const { result, bizId = null } = executed.value;
    const text = JSON.stringify(result ?? null);
    await pipelined([
      storeInTransactionStatement(store, conn.sql, op, row?.record_id ?? 0, text, bizId).execute(),
      conn.sql`COMMIT`.execute(),
    ]);
    ended = true;
    const expiresAt = new Date(row?.expires_at ?? 0);
    return {
      kind: "done",
      answered: firstAnswer(op, result, bizId, { expiresAt, remainingMs: config.ttlMs, askedAt }, text),
    };
  } catch (error) {
    return { kind: "failed", error };
  } finally {
    await conn.close({ ended });
  }
}

/**
 * Attempts until the key's answer is known, within the call's `waitMs`: a first execution; the outcome
 * another copy stored; the key taken over (a lapsed lease or an expired key), then run under that lease; or
 * a refusal. `first`: an attempt made already (in a batch).
 */
export async function claimInTransaction<T, Tx>(call: Call<T, Tx>, first?: Attempt<T>): Promise<Answered<T>> {
  const { store, op, config, requestFingerprint } = call;
  const deadline = Date.now() + config.waitMs;
  let tried = first ?? (await attempt(call, waitLeft(deadline)));
  for (;;) {
    switch (tried.kind) {
      case "done":
        return tried.answered;
      case "held":
        throw inProgress(undefined);
      case "failed":
        return storeOrRelease(call, tried.error);
      case "taken": {
        const found = await decideOnRecord(store, op, tried.existing, requestFingerprint, config, deadline);
        if (found === "again") break;
        if (found.kind === "stored") return replayStored(found.outcome, op);
        return executeUnderLease(call, found.lease);
      }
    }
    // Freed, or a lease holder still at work: give it a moment, then claim again.
    if (tried.existing?.status === "PROCESSING") await sleep(10);
    tried = await attempt(call, waitLeft(deadline));
  }
}

const waitLeft = (deadline: number) => Math.max(1, deadline - Date.now());

/**
 * After a one-transaction attempt failed (and rolled back: nothing of it is left): a declared refusal is
 * stored as the key's FAILED outcome, unless a duplicate got its own outcome in first (then that one is
 * the answer, for everyone); any other failure leaves the key free, as if the request never came.
 */
async function storeOrRelease<T, Tx>(call: Call<T, Tx>, error: unknown): Promise<Answered<T>> {
  const { store, op, config, requestFingerprint } = call;
  const body = op.refusal?.(error);
  if (!body) throw unavailableIfTransient(error);
  const stored = await insertRefusal(store, op, requestFingerprint, body, config);
  if (stored) throw refusalStored(op, body, stored, error);
  // Someone else's outcome is the key's now: answer it, as any duplicate would.
  const existing = await readRecord(store, op);
  const found = await decideOnRecord(
    store,
    op,
    existing,
    requestFingerprint,
    config,
    Date.now() + config.waitMs,
  );
  if (found === "again" || found.kind === "owner") {
    if (found !== "again") await release(store, found.lease);
    throw error;
  }
  return replayStored(found.outcome, op);
}
