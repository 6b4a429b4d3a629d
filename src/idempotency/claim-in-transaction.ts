import { BATCH_CLAIM_WAIT_MS, type BatchAnswer, batcherOf } from "./claim-in-batch";
import { executeUnderLease, sleep } from "./claim-with-lease";
import { guard, inProgress, storedRefusal, unavailableIfTransient } from "./errors";
import { LOCK_NOT_AVAILABLE, pipelined, UNIQUE_VIOLATION } from "./postgres";
import {
  claimInTransactionStatement,
  insertRefusal,
  type RecordRow,
  readRecord,
  recordStatement,
  release,
  replay,
  settle,
  storeInTransactionStatement,
} from "./record";
import { type Call, type ExecuteResult, type IdempotentResult, versionOf } from "./types";

/**
 * The claim as a row of the business transaction, for an operation whose effects are all in this database,
 * in one transaction and as few round trips as the rules allow:
 *
 *   1  BEGIN, lock_timeout for the claim, the claim (a plain INSERT), lock_timeout back, and the
 *      business transaction's first statement, all sent together
 *   …  the rest of the business statements
 *   n  the outcome (an UPDATE of the row the claim inserted) and COMMIT, sent together
 *
 * A duplicate's claim waits on the unique index until this transaction ends, then fails (the key is
 * taken: its transaction is aborted, so the business statements behind the claim did nothing) and it
 * reads the stored outcome; a claim that outlasts the wait is REQUEST_IN_PROGRESS. A holder that
 * crashes, or loses its connection, simply aborts: no claim is left behind, no lease needed. A holder
 * that hangs inside its transaction is ended by the pool's idle_in_transaction_session_timeout.
 *
 * With `config.batch`, a call of an operation declared `batchable` first goes through a batch (./claim-in-batch.ts):
 * several first executions in one transaction. What the batch cannot settle is settled here, as for any call.
 */
export async function claimInTransaction<T, Tx>(call: Call<T, Tx>): Promise<IdempotentResult<T>> {
  const batch = call.config.batch;
  if (!batch || !call.op.batchable) return claimAlone(call);
  const answer = await batcherOf(call.store as never, batch, claimInRunner as never).submit(call);
  switch (answer.kind) {
    case "done":
      return answer.result;
    case "threw":
      throw answer.error;
    case "failed":
      return storeOrRelease(call, answer.error);
    case "alone":
      return claimAlone(call);
  }
}

/** Thrown inside a runner by a call that would wait for another holder: it leaves, and waits outside. */
const LEFT = Symbol("left the runner");

/**
 * A batch of one: the call as it runs alone, but on a runner, so it waits for no other holder of its key (a
 * claim that would wait, or a key still being worked on, leaves the runner and is settled by `claimAlone`).
 */
async function claimInRunner<T, Tx>(call: Call<T, Tx>): Promise<BatchAnswer<T>> {
  try {
    return { kind: "done", result: await claimAlone(call, BATCH_CLAIM_WAIT_MS) };
  } catch (error) {
    return error === LEFT ? { kind: "alone" } : { kind: "threw", error };
  }
}

/** The claim, the business writes and the outcome in one transaction of this call's own. `claimWaitMs`: see claimInRunner. */
async function claimAlone<T, Tx>(call: Call<T, Tx>, claimWaitMs?: number): Promise<IdempotentResult<T>> {
  const { store, op, config, requestFingerprint } = call;
  const deadline = Date.now() + config.waitMs;
  for (;;) {
    const conn = await guard(() => store.hold());
    const askedAt = performance.now();
    let ended = false;
    let attempt: Attempt;
    let taken = false;
    try {
      const waitMs = claimWaitMs ?? Math.max(1, deadline - Date.now());
      const [, timed, claimed, , executed] = await Promise.allSettled([
        conn.sql`BEGIN`.execute(),
        // Also the database's clock just before the claim: a holder that finished after it made this one wait.
        conn.sql<{ started: number }[]>`
          SELECT set_config('lock_timeout', ${`${waitMs}ms`}, true),
                 extract(epoch FROM clock_timestamp())::float8 AS started`.execute(),
        claimInTransactionStatement(store, conn.sql, op, requestFingerprint, config).execute(),
        conn.sql`SET LOCAL lock_timeout TO DEFAULT`.execute(),
        op.execute(conn.tx),
      ]);
      if (claimed.status === "rejected") {
        const code = (claimed.reason as { code?: string }).code;
        if (code === UNIQUE_VIOLATION) taken = true;
        else if (code === LOCK_NOT_AVAILABLE) throw claimWaitMs === undefined ? inProgress(undefined) : LEFT;
        else throw claimed.reason;
      } else if (executed.status === "rejected") {
        throw executed.reason;
      }
      if (taken) {
        // The transaction is aborted: end it and read what the holder stored, together.
        const [, [existing]] = await pipelined([
          conn.sql`ROLLBACK`.execute(),
          recordStatement(store, conn.sql, op),
        ]);
        ended = true;
        const started = timed.status === "fulfilled" ? timed.value[0]?.started : undefined;
        if (existing && started !== undefined && existing.finished > started) {
          call.trace.waited = true;
          call.trace.by = "claim";
        }
        attempt = { existing: existing ? { ...existing, askedAt } : undefined };
      } else {
        const [row] = claimed.status === "fulfilled" ? claimed.value : [];
        const { result, bizId = null } = (executed as PromiseFulfilledResult<ExecuteResult<T>>).value;
        const body = JSON.stringify(result ?? null);
        await pipelined([
          storeInTransactionStatement(store, conn.sql, op.scope, row?.record_id ?? 0, body, bizId).execute(),
          conn.sql`COMMIT`.execute(),
        ]);
        ended = true;
        const expiresAt = new Date(row?.expires_at ?? 0);
        call.remember({
          status: "SUCCESS",
          responseBody: result ?? null,
          answerVersion: versionOf(op),
          bizId,
          expiresAt,
          remainingMs: config.ttlMs,
          askedAt,
        });
        return { result, bizId, replayed: false, keyExpiresAt: expiresAt };
      }
    } catch (error) {
      attempt = { failed: error };
    } finally {
      await conn.close({ ended });
    }
    if ("failed" in attempt) {
      if (attempt.failed === LEFT) throw LEFT;
      return storeOrRelease(call, attempt.failed);
    }
    const found = await settle(store, op, attempt.existing, requestFingerprint, config, deadline);
    if (found === "again") {
      if (claimWaitMs !== undefined) throw LEFT;
      // Released, or a lease holder still at work: give it a moment, then claim again.
      if (attempt.existing?.status === "PROCESSING") await sleep(10);
      continue;
    }
    if (found.kind === "stored") {
      call.remember(found.outcome);
      return replay<T>(found.outcome, op);
    }
    return executeUnderLease(call, found.lease);
  }
}

/** The record another request stored (the key was taken), or what made the attempt fail (rolled back either way). */
type Attempt = { existing: RecordRow | undefined } | { failed: unknown };

/**
 * After a one-transaction attempt failed (and rolled back: nothing of it is left): a declared refusal is
 * stored as the key's FAILED outcome, unless a duplicate got its own outcome in first (then that one is
 * the answer, for everyone); any other failure leaves the key free, as if the request never came.
 */
async function storeOrRelease<T, Tx>(call: Call<T, Tx>, error: unknown): Promise<IdempotentResult<T>> {
  const { store, op, config, requestFingerprint } = call;
  const body = op.refusal?.(error);
  if (!body) throw unavailableIfTransient(error);
  const stored = await insertRefusal(store, op, requestFingerprint, body, config);
  if (stored) {
    call.remember({
      status: "FAILED",
      responseBody: body,
      answerVersion: versionOf(op),
      bizId: null,
      expiresAt: stored.expiresAt,
      remainingMs: stored.remainingMs,
      askedAt: stored.askedAt,
    });
    throw storedRefusal(body, stored.expiresAt, error);
  }
  // Someone else's outcome is the key's now: answer it, as any duplicate would.
  const existing = await readRecord(store, op);
  const found = await settle(store, op, existing, requestFingerprint, config, Date.now() + config.waitMs);
  if (found === "again" || found.kind === "owner") {
    if (found !== "again") await release(store, found.lease);
    throw error;
  }
  call.remember(found.outcome);
  return replay<T>(found.outcome, op);
}
