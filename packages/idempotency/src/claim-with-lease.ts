import { guard, IdempotencyError, leaseLost, unavailableIfTransient } from "./errors";
import { decideOnRecord } from "./existing-record";
import { firstAnswer, refusalStored, replayStored, storedOutcomeOf } from "./outcome";
import { pipelined } from "./postgres";
import {
  claimStatement,
  LEASE_LOST_SQLSTATE,
  readRecord,
  release,
  storeFailure,
  storeFencedStatement,
  toLease,
} from "./record";
import type {
  Acquired,
  Answered,
  Call,
  ExecuteResult,
  HeldConnection,
  IdempotencyConfig,
  IdempotentOperation,
  KeyRef,
  Lease,
  RecordStore,
  Trace,
} from "./types";

/**
 * The claim with a lease, for an operation with outside work (`prepare`): the key first (committed on its
 * own, with a lease that a duplicate may take over once it runs out), then the outside work with no
 * connection held, then the business transaction, whose outcome is stored only if the lease is still this
 * holder's (fencing: a holder that was taken over writes nothing).
 */
export async function claimWithLease<T, Tx>(call: Call<T, Tx>): Promise<Answered<T>> {
  const { store, op, requestFingerprint, config } = call;
  const acquired = await acquire(store, op, requestFingerprint, config, undefined, call.trace);
  if (acquired.kind === "stored") return replayStored(acquired.outcome, op);
  try {
    await op.prepare?.();
  } catch (error) {
    return failUnderLease(call, acquired.lease, error);
  }
  return executeUnderLease(call, acquired.lease);
}

/**
 * Claims the key, or returns the outcome stored under it. Concurrent duplicates
 * poll (with backoff) until the holder finishes, its lease expires, or `waitMs`
 * runs out. Every decision is taken by a conditional statement, never by a read
 * followed by a write.
 */
export async function acquire(
  store: RecordStore<unknown>,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
  deadline = Date.now() + config.waitMs,
  trace: Trace = { waited: false },
): Promise<Acquired> {
  let pause = 10;
  for (;;) {
    const askedAt = performance.now();
    const claimed = await guard(() => claimStatement(store, ref, requestFingerprint, config));
    const lease = toLease(claimed[0], askedAt);
    if (lease) return { kind: "owner", lease };
    const existing = await readRecord(store, ref);
    const found = await decideOnRecord(store, ref, existing, requestFingerprint, config, deadline);
    if (found !== "again") return found;
    if (existing?.status === "PROCESSING") {
      trace.waited = true;
      trace.by = "lease";
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
      pause = Math.min(pause * 2, 200);
    }
  }
}

/** Runs the business writes under a lease (claimed, taken over or renewed) and stores the outcome, fenced. */
export async function executeUnderLease<T, Tx>(call: Call<T, Tx>, lease: Lease): Promise<Answered<T>> {
  const conn = await guard(() => call.store.hold());
  const executed = await executeInTransaction(call.store, conn, lease, call.op);
  await conn.close({ ended: !("failed" in executed) });
  if ("failed" in executed) return failUnderLease(call, lease, executed.failed);
  return firstAnswer(call.op, executed.result, executed.bizId ?? null, lease);
}

/**
 * Runs the business writes and stores the outcome in one transaction. Storing
 * the outcome is conditional on the lease version and comes last: a holder whose
 * key was taken over fails there (the store function raises), so all its
 * writes roll back — which is what lets the outcome travel in the same write as
 * COMMIT (an aborted transaction's COMMIT is a ROLLBACK). The record row is
 * touched only at that last moment, so duplicates never queue behind a slow
 * holder's transaction; they poll, with a bounded wait.
 */
async function executeInTransaction<T, Tx>(
  store: RecordStore<Tx>,
  conn: HeldConnection<Tx>,
  lease: Lease,
  op: IdempotentOperation<T, Tx>,
): Promise<ExecuteResult<T> | { failed: unknown }> {
  const { sql } = conn;
  let outcome: ExecuteResult<T>;
  try {
    // BEGIN goes out with the business transaction's first statement.
    const [began, executed] = await Promise.allSettled([sql`BEGIN`.execute(), op.execute(conn.tx)]);
    if (began.status === "rejected") throw began.reason;
    if (executed.status === "rejected") throw executed.reason;
    outcome = executed.value;
  } catch (error) {
    return { failed: error };
  }
  const { result, bizId = null } = outcome;
  try {
    await pipelined([
      storeFencedStatement(store, sql, lease, JSON.stringify(result ?? null), bizId),
      sql`COMMIT`,
    ]);
  } catch (error) {
    // The failed call turned the COMMIT into a ROLLBACK: nothing was written.
    return { failed: (error as { code?: string }).code === LEASE_LOST_SQLSTATE ? leaseLost() : error };
  }
  return { result, bizId };
}

/**
 * After a rolled-back attempt, with the held connection given back (so a full
 * pool cannot deadlock on it): store a declared refusal, or free the key for
 * a retry. A lost lease is someone else's key now: its holder's answer is the
 * key's, never this attempt's refusal.
 */
async function failUnderLease<T, Tx>(call: Call<T, Tx>, lease: Lease, error: unknown): Promise<Answered<T>> {
  const { store, op } = call;
  if (error instanceof IdempotencyError && error.code === "IDEMPOTENCY_LEASE_LOST") throw error;
  const body = op.refusal?.(error);
  if (body) {
    if (!(await storeFailure(store, lease, body))) return answerOfTakeOver(call);
    throw refusalStored(op, body, lease, error);
  }
  await release(store, lease);
  throw unavailableIfTransient(error);
}

/**
 * The answer of a key another request took over from this holder: the outcome it stored, or, while it
 * works (or once the key was freed), IDEMPOTENCY_LEASE_LOST, which the client retries with the same key.
 */
async function answerOfTakeOver<T, Tx>(call: Call<T, Tx>): Promise<Answered<T>> {
  const existing = await readRecord(call.store, call.op);
  const outcome =
    existing && !existing.expired && existing.fingerprint === call.requestFingerprint
      ? storedOutcomeOf(existing)
      : undefined;
  if (!outcome) throw leaseLost();
  return replayStored(outcome, call.op);
}

export function sleep(duration: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, duration));
}
