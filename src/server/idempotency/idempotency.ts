import { and, eq, sql } from "drizzle-orm";
import type { Db, Tx } from "../db/client";
import { idempotencyRecord } from "../db/schema";
import {
  DomainError,
  type DomainErrorCode,
  isDomainError,
  isTransientError,
  serviceUnavailable,
} from "../errors";
import type { IdempotencyEvent, IdempotencyOutcome } from "../observability/observer";
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
const leaseColumns = {
  recordId: idempotencyRecord.id,
  leaseVersion: idempotencyRecord.leaseVersion,
  expiresAt: idempotencyRecord.expiresAt,
};

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
    const acquired = await acquire(db, op, requestFingerprint, config);
    const result =
      acquired.kind === "stored"
        ? replay<T>(acquired.outcome)
        : await executeUnderLease(db, acquired.lease, op);
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
): Promise<Acquired> {
  const deadline = Date.now() + config.waitMs;
  let pause = 10;
  for (;;) {
    const claimed = await guard(() =>
      db
        .insert(idempotencyRecord)
        .values({
          userId: ref.scope,
          bizType: ref.bizType,
          idempotencyKey: ref.key,
          fingerprint: requestFingerprint,
          status: "PROCESSING",
          lockedUntil: ms(config.leaseMs),
          expiresAt: ms(config.ttlMs),
        })
        .onConflictDoNothing({
          target: [idempotencyRecord.userId, idempotencyRecord.bizType, idempotencyRecord.idempotencyKey],
        })
        .returning(leaseColumns),
    );
    if (claimed[0]) return { kind: "owner", lease: claimed[0] };

    const [existing] = await guard(() =>
      db
        .select({
          id: idempotencyRecord.id,
          fingerprint: idempotencyRecord.fingerprint,
          status: idempotencyRecord.status,
          responseBody: idempotencyRecord.responseBody,
          bizId: idempotencyRecord.bizId,
          leaseVersion: idempotencyRecord.leaseVersion,
          expiresAt: idempotencyRecord.expiresAt,
          leaseLive: sql<boolean>`coalesce(${idempotencyRecord.lockedUntil} > now(), false)`,
          expired: sql<boolean>`${idempotencyRecord.expiresAt} <= now()`,
        })
        .from(idempotencyRecord)
        .where(keyMatches(ref)),
    );
    // Released between our insert and our read: the key is free, claim it again.
    if (!existing) continue;

    if (existing.expired && !(existing.status === "PROCESSING" && existing.leaseLive)) {
      const renewed = await renewExpired(db, existing.id, existing.leaseVersion, requestFingerprint, config);
      if (renewed) return { kind: "owner", lease: renewed };
      continue;
    }
    if (existing.fingerprint !== requestFingerprint) {
      throw new DomainError(
        "IDEMPOTENCY_KEY_REUSED",
        "This idempotency key was already used with a different request. Use a new key for a new request.",
      );
    }
    if (existing.status !== "PROCESSING") {
      return {
        kind: "stored",
        outcome: {
          status: existing.status,
          responseBody: existing.responseBody,
          bizId: existing.bizId,
          expiresAt: existing.expiresAt,
        },
      };
    }
    if (!existing.leaseLive) {
      const taken = await takeOver(db, existing.id, existing.leaseVersion, config);
      if (taken) return { kind: "owner", lease: taken };
      continue;
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      throw new DomainError(
        "REQUEST_IN_PROGRESS",
        "A request with this idempotency key is still being processed; retry with the same key.",
        { retryable: true, retryAfterMs: 1000, keyExpiresAt: existing.expiresAt },
      );
    }
    await sleep(Math.min(pause, remaining));
    pause = Math.min(pause * 2, 200);
  }
}

/**
 * Runs the business writes and stores the outcome in one transaction. Storing
 * the outcome is conditional on the lease version and comes last, so a holder
 * whose key was taken over rolls back all its writes; and the record row is
 * locked only for the instant before commit, so duplicates never queue behind
 * a slow holder's transaction (they poll, with a bounded wait).
 */
export async function executeUnderLease<T>(
  db: Db,
  lease: Lease,
  op: IdempotentOperation<T>,
): Promise<IdempotentResult<T>> {
  try {
    const outcome = await db.transaction(async (tx) => {
      const { result, bizId = null } = await op.execute(tx);
      const stored = await tx
        .update(idempotencyRecord)
        .set({
          status: "SUCCESS",
          responseBody: result,
          bizId,
          lockedUntil: null,
          updatedAt: sql`now()`,
        })
        .where(leaseMatches(lease))
        .returning({ id: idempotencyRecord.id });
      if (stored.length === 0) throw leaseLost();
      return { result, bizId };
    });
    return { ...outcome, replayed: false, keyExpiresAt: lease.expiresAt };
  } catch (error) {
    if (isDomainError(error, "IDEMPOTENCY_LEASE_LOST")) throw error;
    if (isDomainError(error) && op.storedErrors.includes(error.code)) {
      await storeFailure(db, lease, error);
      error.details.keyExpiresAt = lease.expiresAt;
      throw error;
    }
    await release(db, lease);
    throw isTransientError(error) ? serviceUnavailable(error) : error;
  }
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

async function storeFailure(db: Db, lease: Lease, error: DomainError): Promise<void> {
  const body: StoredError = { code: error.code, message: error.message, meta: error.details.meta };
  // Zero rows: another request took the key over and will store its own outcome.
  await guard(() =>
    db
      .update(idempotencyRecord)
      .set({ status: "FAILED", responseBody: body, lockedUntil: null, updatedAt: sql`now()` })
      .where(leaseMatches(lease)),
  );
}

/** Best effort: if the database is gone, the lease runs out and the key is taken over instead. */
async function release(db: Db, lease: Lease): Promise<void> {
  try {
    await db.delete(idempotencyRecord).where(leaseMatches(lease));
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

type LeaseRow = { record_id: string | number; lease_version: number; expires_at: string | Date };

function toLease(row: LeaseRow | undefined): Lease | undefined {
  return row
    ? {
        recordId: Number(row.record_id),
        leaseVersion: row.lease_version,
        expiresAt: new Date(row.expires_at),
      }
    : undefined;
}

function keyMatches(ref: KeyRef) {
  return and(
    eq(idempotencyRecord.userId, ref.scope),
    eq(idempotencyRecord.bizType, ref.bizType),
    eq(idempotencyRecord.idempotencyKey, ref.key),
  );
}

function leaseMatches(lease: Lease) {
  return and(
    eq(idempotencyRecord.id, lease.recordId),
    eq(idempotencyRecord.leaseVersion, lease.leaseVersion),
    eq(idempotencyRecord.status, "PROCESSING"),
  );
}

/** Fail closed: when the record cannot be read or written, the operation does not run. */
async function guard<R>(statement: () => Promise<R>): Promise<R> {
  try {
    return await statement();
  } catch (error) {
    throw isTransientError(error) ? serviceUnavailable(error) : error;
  }
}

function sleep(duration: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, duration));
}
