import { sql } from "drizzle-orm";
import type postgres from "postgres";
import { type Db, type HeldConnection, holdConnection, type Tx } from "~/server/db/client";
import { DomainError, type DomainErrorCode, isDomainError, unavailableIfTransient } from "~/server/errors";
import { pipelined } from "~/shared/postgres-driver";
import type { IdempotencyEvent, IdempotencyOutcome } from "./events";
import { fingerprint as fingerprintOf } from "./fingerprint";

/**
 * The idempotency core. Every operation that must happen once per key goes
 * through `runIdempotent`; the contract is written down in docs/idempotency.md.
 *
 *   acquire  - claim the key (INSERT … ON CONFLICT DO NOTHING), or find the
 *              stored outcome, or wait for the holder, or take over an expired lease
 *   execute  - business writes and the stored outcome commit in one transaction,
 *              fenced by the lease version
 *   release  - a transient failure deletes the claim so the key can run again
 */

export interface IdempotencyConfig {
  /** How long a key (and its stored outcome) is kept. */
  ttlMs: number;
  /** How long a holder may take before another request may take over its key. */
  leaseMs: number;
  /** How long a concurrent duplicate waits for the holder before answering REQUEST_IN_PROGRESS. */
  waitMs: number;
  /** Told the outcome of every call (logs, metrics). */
  observe?: (event: IdempotencyEvent) => void;
}

export const DEFAULT_IDEMPOTENCY_CONFIG: IdempotencyConfig = {
  ttlMs: 24 * 60 * 60 * 1000,
  leaseMs: 30_000,
  waitMs: 5_000,
};

export interface KeyRef {
  /** Whose key: the shopper. One scope can never see another's records. */
  scope: string;
  bizType: string;
  key: string;
}

export interface ExecuteResult<T> {
  result: T;
  /** Id of the business object the operation made, kept on the record for operators. */
  bizId?: string | null;
}

export interface IdempotentOperation<T> extends KeyRef {
  /** The validated, normalised request; its canonical hash decides "same request". */
  request: unknown;
  /** Business writes. Runs inside the transaction that also stores the outcome. */
  execute: (tx: Tx) => Promise<ExecuteResult<T>>;
  /**
   * Deterministic business rejections: stored and replayed like a success. Every
   * other failure releases the key so the same key can run again.
   */
  storedErrors: readonly DomainErrorCode[];
  /**
   * Work outside this database that must precede the business transaction. It runs once
   * the key is held (so duplicates wait for, or replay, the holder instead of repeating
   * it), outside any transaction, and must be idempotent by its own key: a holder that
   * crashed is taken over, and the taker runs it again.
   */
  prepare?: () => Promise<void>;
}

export interface IdempotentResult<T> {
  result: T;
  replayed: boolean;
  bizId: string | null;
  /** When the key is forgotten: until then, the same request gets this answer. */
  keyExpiresAt: Date;
}

/** Proof of holding a key: every write made under it is conditional on `leaseVersion`. */
export interface Lease {
  recordId: number;
  leaseVersion: number;
  expiresAt: Date;
}

interface StoredOutcome {
  status: "SUCCESS" | "FAILED";
  responseBody: unknown;
  bizId: string | null;
  expiresAt: Date;
}

export type Acquired = { kind: "owner"; lease: Lease } | { kind: "stored"; outcome: StoredOutcome };

interface StoredError {
  code: DomainErrorCode;
  message: string;
  meta?: Record<string, unknown>;
}

const ms = (value: number) => sql`(now() + ${value} * interval '1 millisecond')`;

/** Statements the core sends itself go straight to the held connection, in the order issued. */
type Conn = postgres.Sql;

interface RecordRow {
  id: string | number;
  fingerprint: string;
  status: "PROCESSING" | "SUCCESS" | "FAILED";
  response_body: unknown;
  biz_id: string | null;
  lease_version: number;
  expires_at: string | Date;
  lease_live: boolean;
  expired: boolean;
}

type LeaseRow = { record_id: string | number; lease_version: number; expires_at: string | Date };

function claimStatement(
  sql: postgres.Sql,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
) {
  return sql<LeaseRow[]>`
    INSERT INTO idempotency_record
           (user_id, biz_type, idempotency_key, fingerprint, status, locked_until, expires_at)
    VALUES (${ref.scope}, ${ref.bizType}, ${ref.key}, ${requestFingerprint}, 'PROCESSING',
            now() + ${config.leaseMs} * interval '1 millisecond',
            now() + ${config.ttlMs} * interval '1 millisecond')
    ON CONFLICT (user_id, biz_type, idempotency_key) DO NOTHING
    RETURNING id AS record_id, lease_version, expires_at`;
}

function recordStatement(sql: postgres.Sql, ref: KeyRef) {
  return sql<RecordRow[]>`
    SELECT id, fingerprint, status, response_body, biz_id, lease_version, expires_at,
           coalesce(locked_until > now(), false) AS lease_live, expires_at <= now() AS expired
      FROM idempotency_record
     WHERE user_id = ${ref.scope} AND biz_type = ${ref.bizType} AND idempotency_key = ${ref.key}`;
}

export async function runIdempotent<T>(
  db: Db,
  op: IdempotentOperation<T>,
  config: IdempotencyConfig = DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<IdempotentResult<T>> {
  const started = Date.now();
  const emit = (outcome: IdempotencyOutcome) =>
    config.observe?.({
      bizType: op.bizType,
      key: op.key,
      scope: op.scope,
      outcome,
      durationMs: Date.now() - started,
    });
  try {
    const requestFingerprint = fingerprintOf(op.bizType, op.request);
    const result = op.prepare
      ? await prepareThenExecute(db, op, op.prepare, requestFingerprint, config)
      : await claimAndExecute(db, op, requestFingerprint, config);
    emit(result.replayed ? "replayed" : "first");
    return result;
  } catch (error) {
    emit(outcomeOfFailure(error, op.storedErrors));
    throw error;
  }
}

function outcomeOfFailure(error: unknown, storedErrors: readonly DomainErrorCode[]): IdempotencyOutcome {
  if (!isDomainError(error)) return "released";
  if (error.details.replayed) return "replayed_error";
  switch (error.code) {
    case "IDEMPOTENCY_KEY_REUSED":
      return "mismatch";
    case "REQUEST_IN_PROGRESS":
    case "IDEMPOTENCY_LEASE_LOST":
      return "conflict";
    case "SERVICE_UNAVAILABLE":
      return "unavailable";
    default:
      return storedErrors.includes(error.code) ? "stored_error" : "released";
  }
}

/**
 * The common case in as few round trips as the rules allow: the claim (committed
 * on its own) and the BEGIN of the business transaction travel together, so a
 * first request is already in its transaction when it learns it owns the key;
 * a replay reads the record and closes the empty transaction together.
 */
async function claimAndExecute<T>(
  db: Db,
  op: IdempotentOperation<T>,
  requestFingerprint: string,
  config: IdempotencyConfig,
): Promise<IdempotentResult<T>> {
  const conn = await guard(() => holdConnection(db));
  let existing: RecordRow | undefined;
  let attempt: Attempt<T> | undefined;
  let lease: Lease | undefined;
  try {
    const [claimed, began] = await Promise.allSettled([
      claimStatement(conn.sql, op, requestFingerprint, config).execute(),
      conn.sql`BEGIN`.execute(),
    ]);
    if (claimed.status === "rejected") throw claimed.reason;
    lease = toLease(claimed.value[0]);
    if (began.status === "rejected") throw began.reason;
    if (lease) attempt = await executeInTransaction(conn, lease, op, { begun: true });
    else [[existing]] = await pipelined([recordStatement(conn.sql, op), conn.sql`ROLLBACK`]);
  } catch (error) {
    attempt = { failed: error };
  } finally {
    await conn.close();
  }
  if (attempt && "failed" in attempt) {
    if (lease) return failUnderLease(db, lease, op, attempt.failed);
    throw unavailableIfTransient(attempt.failed);
  }
  if (attempt) return attempt;
  const deadline = Date.now() + config.waitMs;
  const found = await settle(db, existing, requestFingerprint, config, deadline);
  if (found !== "again") {
    return found.kind === "stored" ? replay<T>(found.outcome) : executeUnderLease(db, found.lease, op);
  }
  // Someone holds the key: give them a moment before looking again.
  if (existing?.status === "PROCESSING") await sleep(10);
  const acquired = await acquire(db, op, requestFingerprint, config, deadline);
  return acquired.kind === "stored" ? replay<T>(acquired.outcome) : executeUnderLease(db, acquired.lease, op);
}

/** The key first, then the outside work with no connection held, then the business transaction. */
async function prepareThenExecute<T>(
  db: Db,
  op: IdempotentOperation<T>,
  prepare: () => Promise<void>,
  requestFingerprint: string,
  config: IdempotencyConfig,
): Promise<IdempotentResult<T>> {
  const acquired = await acquire(db, op, requestFingerprint, config);
  if (acquired.kind === "stored") return replay<T>(acquired.outcome);
  try {
    await prepare();
  } catch (error) {
    return failUnderLease(db, acquired.lease, op, error);
  }
  return executeUnderLease(db, acquired.lease, op);
}

/**
 * Claims the key, or returns the outcome stored under it. Concurrent duplicates
 * poll (with backoff) until the holder finishes, its lease expires, or `waitMs`
 * runs out. Every decision is taken by a conditional statement, never by a read
 * followed by a write.
 */
export async function acquire(
  db: Db,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
  deadline = Date.now() + config.waitMs,
): Promise<Acquired> {
  const sql = db.$client;
  let pause = 10;
  for (;;) {
    const lease = toLease((await guard(() => claimStatement(sql, ref, requestFingerprint, config)))[0]);
    if (lease) return { kind: "owner", lease };
    const [existing] = await guard(() => recordStatement(sql, ref));
    const found = await settle(db, existing, requestFingerprint, config, deadline);
    if (found !== "again") return found;
    if (existing?.status === "PROCESSING") {
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
      pause = Math.min(pause * 2, 200);
    }
  }
}

/**
 * What an existing record means for this request: its stored outcome, the key
 * (renewed or taken over), "again" (claim or look again), or an error.
 */
async function settle(
  db: Db,
  existing: RecordRow | undefined,
  requestFingerprint: string,
  config: IdempotencyConfig,
  deadline: number,
): Promise<Acquired | "again"> {
  // Released between the claim and the read: the key is free, claim it again.
  if (!existing) return "again";
  const recordId = Number(existing.id);
  if (existing.expired && !(existing.status === "PROCESSING" && existing.lease_live)) {
    const renewed = await renewExpired(db, recordId, existing.lease_version, requestFingerprint, config);
    return renewed ? { kind: "owner", lease: renewed } : "again";
  }
  if (existing.fingerprint !== requestFingerprint) {
    throw new DomainError(
      "IDEMPOTENCY_KEY_REUSED",
      "This idempotency key was already used with a different request. Use a new key for a new request.",
    );
  }
  const expiresAt = new Date(existing.expires_at);
  if (existing.status !== "PROCESSING") {
    return {
      kind: "stored",
      outcome: {
        status: existing.status,
        responseBody: existing.response_body,
        bizId: existing.biz_id,
        expiresAt,
      },
    };
  }
  if (!existing.lease_live) {
    const taken = await takeOver(db, recordId, existing.lease_version, config);
    return taken ? { kind: "owner", lease: taken } : "again";
  }
  if (deadline - Date.now() <= 0) {
    throw new DomainError(
      "REQUEST_IN_PROGRESS",
      "A request with this idempotency key is still being processed; retry with the same key.",
      { retryable: true, retryAfterMs: 1000, keyExpiresAt: expiresAt },
    );
  }
  return "again";
}

/** Runs the business writes under a lease obtained earlier (a takeover, a renewal, a test). */
export async function executeUnderLease<T>(
  db: Db,
  lease: Lease,
  op: IdempotentOperation<T>,
): Promise<IdempotentResult<T>> {
  const conn = await guard(() => holdConnection(db));
  const attempt = await executeInTransaction(conn, lease, op, { begun: false });
  await conn.close();
  return "failed" in attempt ? failUnderLease(db, lease, op, attempt.failed) : attempt;
}

/** A first execution's result, or what made it fail (the transaction is over either way). */
type Attempt<T> = IdempotentResult<T> | { failed: unknown };

/**
 * Runs the business writes and stores the outcome in one transaction. Storing
 * the outcome is conditional on the lease version and comes last: a holder whose
 * key was taken over fails there (idempotency_store_outcome raises), so all its
 * writes roll back — which is what lets the outcome travel in the same write as
 * COMMIT (an aborted transaction's COMMIT is a ROLLBACK). The record row is
 * touched only at that last moment, so duplicates never queue behind a slow
 * holder's transaction; they poll, with a bounded wait.
 */
async function executeInTransaction<T>(
  conn: HeldConnection<Tx>,
  lease: Lease,
  op: IdempotentOperation<T>,
  { begun }: { begun: boolean },
): Promise<Attempt<T>> {
  const { sql } = conn;
  let outcome: ExecuteResult<T>;
  try {
    // When BEGIN has not gone out with the claim, it goes out with the business transaction's first statement.
    const [began, executed] = await Promise.allSettled([
      begun ? undefined : sql`BEGIN`.execute(),
      op.execute(conn.tx),
    ]);
    if (began.status === "rejected") throw began.reason;
    if (executed.status === "rejected") throw executed.reason;
    outcome = executed.value;
  } catch (error) {
    return { failed: error };
  }
  const { result, bizId = null } = outcome;
  try {
    await pipelined([
      sql`SELECT idempotency_store_outcome(${lease.recordId}, ${lease.leaseVersion}, 'SUCCESS',
                                           ${JSON.stringify(result ?? null)}::jsonb, ${bizId})`,
      sql`COMMIT`,
    ]);
  } catch (error) {
    // The failed call turned the COMMIT into a ROLLBACK: nothing was written.
    return { failed: (error as { code?: string }).code === LEASE_LOST_SQLSTATE ? leaseLost() : error };
  }
  return { result, bizId, replayed: false, keyExpiresAt: lease.expiresAt };
}

/** Raised by idempotency_store_outcome (drizzle/0006) when the lease was taken over. */
const LEASE_LOST_SQLSTATE = "XO001";

/**
 * After a rolled-back attempt, with the held connection given back (so a full
 * pool cannot deadlock on it): store a declared rejection, or free the key for
 * a retry. A lost lease is someone else's key now.
 */
async function failUnderLease<T>(
  db: Db,
  lease: Lease,
  op: IdempotentOperation<T>,
  error: unknown,
): Promise<never> {
  if (isDomainError(error, "IDEMPOTENCY_LEASE_LOST")) throw error;
  const sql = db.$client;
  if (isDomainError(error) && op.storedErrors.includes(error.code)) {
    await storeFailure(sql, lease, error);
    error.details.keyExpiresAt = lease.expiresAt;
    throw error;
  }
  await release(sql, lease);
  throw unavailableIfTransient(error);
}

function replay<T>(outcome: StoredOutcome): IdempotentResult<T> {
  if (outcome.status === "SUCCESS") {
    return {
      result: outcome.responseBody as T,
      replayed: true,
      bizId: outcome.bizId,
      keyExpiresAt: outcome.expiresAt,
    };
  }
  const stored = outcome.responseBody as StoredError;
  throw new DomainError(stored.code, stored.message, {
    replayed: true,
    meta: stored.meta,
    keyExpiresAt: outcome.expiresAt,
  });
}

function leaseLost(): DomainError {
  return new DomainError(
    "IDEMPOTENCY_LEASE_LOST",
    "This request took too long and another request with the same key took over; retry with the same key to get its result.",
    { retryable: true, retryAfterMs: 500 },
  );
}

async function storeFailure(sql: Conn, lease: Lease, error: DomainError): Promise<void> {
  const body: StoredError = { code: error.code, message: error.message, meta: error.details.meta };
  // Zero rows: another request took the key over and will store its own outcome.
  await guard(
    () => sql`
      UPDATE idempotency_record
         SET status = 'FAILED', response_body = ${JSON.stringify(body)}::jsonb, locked_until = NULL,
             updated_at = now()
       WHERE id = ${lease.recordId} AND lease_version = ${lease.leaseVersion} AND status = 'PROCESSING'`,
  );
}

/** Best effort: if the database is gone, the lease runs out and the key is taken over instead. */
async function release(sql: Conn, lease: Lease): Promise<void> {
  try {
    await sql`
      DELETE FROM idempotency_record
       WHERE id = ${lease.recordId} AND lease_version = ${lease.leaseVersion} AND status = 'PROCESSING'`;
  } catch {
    // The original error is the one worth reporting.
  }
}

async function takeOver(
  db: Db,
  recordId: number,
  seenVersion: number,
  config: IdempotencyConfig,
): Promise<Lease | undefined> {
  // SKIP LOCKED: a holder still inside its transaction keeps the row locked; we wait by polling instead.
  const rows = await guard(() =>
    db.execute<LeaseRow>(sql`
      UPDATE idempotency_record
         SET lease_version = lease_version + 1, locked_until = ${ms(config.leaseMs)}, updated_at = now()
       WHERE id = (SELECT id FROM idempotency_record
                    WHERE id = ${recordId} AND status = 'PROCESSING' AND lease_version = ${seenVersion}
                      AND locked_until <= now()
                    FOR UPDATE SKIP LOCKED)
      RETURNING id AS record_id, lease_version, expires_at`),
  );
  return toLease(rows[0]);
}

async function renewExpired(
  db: Db,
  recordId: number,
  seenVersion: number,
  requestFingerprint: string,
  config: IdempotencyConfig,
): Promise<Lease | undefined> {
  const rows = await guard(() =>
    db.execute<LeaseRow>(sql`
      UPDATE idempotency_record
         SET lease_version = lease_version + 1, status = 'PROCESSING', fingerprint = ${requestFingerprint},
             response_body = NULL, biz_id = NULL, locked_until = ${ms(config.leaseMs)},
             created_at = now(), updated_at = now(), expires_at = ${ms(config.ttlMs)}
       WHERE id = (SELECT id FROM idempotency_record
                    WHERE id = ${recordId} AND lease_version = ${seenVersion} AND expires_at <= now()
                    FOR UPDATE SKIP LOCKED)
      RETURNING id AS record_id, lease_version, expires_at`),
  );
  return toLease(rows[0]);
}

function toLease(row: LeaseRow | undefined): Lease | undefined {
  return row
    ? {
        recordId: Number(row.record_id),
        leaseVersion: row.lease_version,
        expiresAt: new Date(row.expires_at),
      }
    : undefined;
}

/** Fail closed: when the record cannot be read or written, the operation does not run. */
async function guard<R>(statement: () => Promise<R>): Promise<R> {
  try {
    return await statement();
  } catch (error) {
    throw unavailableIfTransient(error);
  }
}

function sleep(duration: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, duration));
}
