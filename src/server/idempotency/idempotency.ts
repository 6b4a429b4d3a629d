import { sql } from "drizzle-orm";
import type postgres from "postgres";
import { type Db, type HeldConnection, holdConnection, type Tx } from "~/server/db/client";
import { IDEMPOTENCY_MACHINE, onlyFrom } from "~/server/db/machines";
import { DomainError, type DomainErrorCode, isDomainError, unavailableIfTransient } from "~/server/errors";
import { pipelined } from "~/shared/postgres-driver";
import { ABSORBERS, type Absorber, type IdempotencyEvent, type IdempotencyOutcome } from "./events";
import { fingerprint as fingerprintOf } from "./fingerprint";
import { cacheKeyOf, type ReplayCache } from "./replay-cache";

/** The record's transitions (db/machines.ts): every status it writes comes from there. */
const RECORD = IDEMPOTENCY_MACHINE.transitions;

/**
 * The idempotency core. Every operation that must happen once per key goes
 * through `runIdempotent`; the contract is written down in docs/idempotency.md.
 *
 * Two ways to hold a key:
 *   one transaction - an operation whose effects are all in this database claims the key inside the
 *              business transaction (a plain INSERT: the unique index makes a duplicate wait for the
 *              holder's COMMIT or ROLLBACK), runs its writes and stores the outcome, and commits once
 *   two phases - an operation with outside work (`prepare`) claims the key in a transaction of its own,
 *              with a lease that a duplicate may take over once it runs out, and then executes and
 *              stores the outcome in a second transaction fenced by the lease version
 * Either way a duplicate finds the stored outcome and replays it, and each instance keeps the outcomes
 * it saw in a replay cache (./replay-cache.ts) that answers replays without the database.
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
  /** This instance's replay cache (absent: every replay reads the database). */
  cache?: ReplayCache;
  /**
   * Claim the key inside the business transaction for operations without `prepare` (one commit; see
   * inOneTransaction). The app turns it on (IDEMPOTENCY_ONE_TRANSACTION, default true); absent here,
   * every operation takes the two-phase claim.
   */
  oneTransaction?: boolean;
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
  /**
   * The shape of the answer this code stores (default 1), kept on the record by whoever claims or takes the
   * key: an answer stored by an older deploy is replayed through `upgradeAnswer`, or as stored.
   */
  answerVersion?: number;
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
  /** Reads a success stored under an older `answerVersion` as this code answers it (absent: as stored). */
  upgradeAnswer?: (stored: unknown, storedVersion: number) => T;
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
  /** The record's key is (user_id, id): its shopper (docs/scale-out.md) and its id. */
  scope: string;
  recordId: number;
  leaseVersion: number;
  expiresAt: Date;
  /** How long the key still lives, as the database computed it (the replay cache's clock). */
  remainingMs: number;
  /** performance.now() before that statement was sent. */
  askedAt: number;
}

interface StoredOutcome {
  status: "SUCCESS" | "FAILED";
  responseBody: unknown;
  /** The shape it was stored in (KeyRef.answerVersion of the code that stored it). */
  answerVersion: number;
  bizId: string | null;
  expiresAt: Date;
  /** As on Lease: when a cache may stop trusting it. */
  remainingMs: number;
  askedAt: number;
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
  user_id: string;
  id: string | number;
  fingerprint: string;
  status: "PROCESSING" | "SUCCESS" | "FAILED";
  response_body: unknown;
  answer_version: number;
  biz_id: string | null;
  lease_version: number;
  expires_at: string | Date;
  /** When the outcome was stored, in seconds (the holder's clock_timestamp() in the one-transaction path). */
  finished: number;
  remaining_ms: number;
  lease_live: boolean;
  expired: boolean;
  /** performance.now() before the read was sent (set here, not by the database). */
  askedAt?: number;
}

type LeaseRow = {
  user_id: string;
  record_id: string | number;
  lease_version: number;
  expires_at: string | Date;
  remaining_ms: number;
};

/** The two-phase claim: committed on its own; a key already there is no error, just no row. */
function claimStatement(
  sql: postgres.Sql,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
) {
  return sql<LeaseRow[]>`
    INSERT INTO idempotency_record
           (user_id, biz_type, idempotency_key, fingerprint, status, answer_version, locked_until, expires_at)
    VALUES (${ref.scope}, ${ref.bizType}, ${ref.key}, ${requestFingerprint}, ${RECORD.claim.to}, ${versionOf(ref)},
            now() + ${config.leaseMs} * interval '1 millisecond',
            now() + ${config.ttlMs} * interval '1 millisecond')
    ON CONFLICT (user_id, biz_type, idempotency_key) DO NOTHING
    RETURNING user_id, id AS record_id, lease_version, expires_at, greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms`;
}

/**
 * The one-transaction claim: a plain INSERT. A key that is there already is an error (unique_violation),
 * which aborts the transaction, so the business statements sent behind it do nothing; a key another
 * transaction is inserting right now makes this one wait for that transaction's end (bounded by
 * lock_timeout), then either fail (it committed) or succeed (it rolled back).
 */
function claimInTransactionStatement(
  sql: postgres.Sql,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
) {
  return sql<{ record_id: string | number; expires_at: string | Date }[]>`
    INSERT INTO idempotency_record
           (user_id, biz_type, idempotency_key, fingerprint, status, answer_version, locked_until, expires_at)
    VALUES (${ref.scope}, ${ref.bizType}, ${ref.key}, ${requestFingerprint}, ${RECORD.claim.to}, ${versionOf(ref)},
            now() + ${config.leaseMs} * interval '1 millisecond',
            now() + ${config.ttlMs} * interval '1 millisecond')
    RETURNING id AS record_id, expires_at`;
}

function recordStatement(sql: postgres.Sql, ref: KeyRef) {
  return sql<RecordRow[]>`
    SELECT user_id, id, fingerprint, status, response_body, answer_version, biz_id, lease_version, expires_at,
           extract(epoch FROM updated_at)::float8 AS finished,
           greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms,
           coalesce(locked_until > now(), false) AS lease_live, expires_at <= now() AS expired
      FROM idempotency_record
     WHERE user_id = ${ref.scope} AND biz_type = ${ref.bizType} AND idempotency_key = ${ref.key}`;
}

/** Reads the record, noting when it was asked (for the replay cache's clock). */
async function readRecord(sql: postgres.Sql, ref: KeyRef): Promise<RecordRow | undefined> {
  const askedAt = performance.now();
  const [row] = await guard(() => recordStatement(sql, ref));
  return row ? { ...row, askedAt } : undefined;
}

export async function runIdempotent<T>(
  db: Db,
  op: IdempotentOperation<T>,
  config: IdempotencyConfig = DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<IdempotentResult<T>> {
  const started = Date.now();
  const trace: Trace = { waited: false };
  const emit = (outcome: IdempotencyOutcome) => {
    const absorbedBy = absorberOf(outcome, trace);
    config.observe?.({
      bizType: op.bizType,
      key: op.key,
      scope: op.scope,
      outcome,
      durationMs: Date.now() - started,
      ...(absorbedBy ? { absorbedBy } : {}),
    });
  };
  try {
    const requestFingerprint = fingerprintOf(op.bizType, op.request);
    const result = config.cache
      ? await runCached(db, op, requestFingerprint, config, config.cache, trace)
      : await runUncached(db, op, requestFingerprint, config, trace);
    emit(result.replayed ? (trace.waited ? "waited" : "replayed") : "first");
    return result;
  } catch (error) {
    emit(outcomeOfFailure(error, op.storedErrors));
    throw error;
  }
}

/** What answered a copy that did not run: a replay's source (the record unless the trace says otherwise), or a refusal's reason. */
function absorberOf(outcome: IdempotencyOutcome, trace: Trace): string | undefined {
  if (outcome === "mismatch") return ABSORBERS.fingerprint;
  if (outcome === "conflict") return ABSORBERS.conflict;
  if (outcome === "replayed" || outcome === "waited" || outcome === "replayed_error")
    return ABSORBERS[trace.by ?? "record"];
  return undefined;
}

/** What one call went through, for its observer: whether it waited for another copy of itself, and what answered it. */
interface Trace {
  waited: boolean;
  by?: Exclude<Absorber, "conflict" | "fingerprint">;
}

function runUncached<T>(
  db: Db,
  op: IdempotentOperation<T>,
  requestFingerprint: string,
  config: IdempotencyConfig,
  trace: Trace,
  remember: Remember = () => {},
): Promise<IdempotentResult<T>> {
  const call: Call<T> = { db, op, requestFingerprint, config, remember, trace };
  if (op.prepare) return prepareThenExecute(call, op.prepare);
  return config.oneTransaction ? inOneTransaction(call) : prepareThenExecute(call, async () => {});
}

/**
 * With a replay cache: an outcome this instance knows is answered from memory; a key already running
 * here is waited for (no connection taken) and then looked up again; otherwise the request runs and
 * what it learns (its own outcome, or the one it replayed) is kept.
 */
async function runCached<T>(
  db: Db,
  op: IdempotentOperation<T>,
  requestFingerprint: string,
  config: IdempotencyConfig,
  cache: ReplayCache,
  trace: Trace,
): Promise<IdempotentResult<T>> {
  const key = cacheKeyOf(op.scope, op.bizType, op.key);
  const remember: Remember = (outcome) => {
    const text = JSON.stringify(outcome.responseBody);
    cache.put(
      key,
      {
        fingerprint: requestFingerprint,
        status: outcome.status,
        // What a database replay returns: the stored text parsed (no Dates, no undefined members).
        responseBody: text === undefined ? null : JSON.parse(text),
        answerVersion: outcome.answerVersion,
        bizId: outcome.bizId,
        expiresAt: outcome.expiresAt,
      },
      outcome.askedAt,
      outcome.remainingMs,
      text?.length ?? 4,
    );
  };
  for (;;) {
    const hit = cache.get(key);
    if (hit) {
      if (hit.fingerprint !== requestFingerprint) throw keyReused();
      trace.by ??= "cache";
      return replay<T>(hit, op);
    }
    const flight = await cache.once(key, () =>
      runUncached(db, op, requestFingerprint, config, trace, remember),
    );
    if (flight.ran) return flight.value;
    // Another copy of this request was running in this instance: this one waited for it.
    trace.waited = true;
    trace.by = "flight";
  }
}

/** Tells the replay cache an outcome that is now final under the key. */
type Remember = (outcome: StoredOutcome) => void;

interface Call<T> {
  db: Db;
  op: IdempotentOperation<T>;
  requestFingerprint: string;
  config: IdempotencyConfig;
  remember: Remember;
  trace: Trace;
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

/** PostgreSQL's unique_violation: the one-transaction claim found the key taken. */
const UNIQUE_VIOLATION = "23505";
/** lock_not_available: the holder of the key outlasted the wait. */
const LOCK_NOT_AVAILABLE = "55P03";

/**
 * An operation whose effects are all in this database, in one transaction and as few round trips as
 * the rules allow:
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
 */
async function inOneTransaction<T>(call: Call<T>): Promise<IdempotentResult<T>> {
  const { db, op, config, requestFingerprint } = call;
  const deadline = Date.now() + config.waitMs;
  for (;;) {
    const conn = await guard(() => holdConnection(db));
    const askedAt = performance.now();
    let ended = false;
    let attempt: Attempt;
    let taken = false;
    try {
      const waitMs = Math.max(1, deadline - Date.now());
      const [, timed, claimed, , executed] = await Promise.allSettled([
        conn.sql`BEGIN`.execute(),
        // Also the database's clock just before the claim: a holder that finished after it made this one wait.
        conn.sql<{ started: number }[]>`
          SELECT set_config('lock_timeout', ${`${waitMs}ms`}, true),
                 extract(epoch FROM clock_timestamp())::float8 AS started`.execute(),
        claimInTransactionStatement(conn.sql, op, requestFingerprint, config).execute(),
        conn.sql`SET LOCAL lock_timeout TO DEFAULT`.execute(),
        op.execute(conn.tx),
      ]);
      if (claimed.status === "rejected") {
        const code = (claimed.reason as { code?: string }).code;
        if (code === UNIQUE_VIOLATION) taken = true;
        else if (code === LOCK_NOT_AVAILABLE) throw inProgress(undefined);
        else throw claimed.reason;
      } else if (executed.status === "rejected") {
        throw executed.reason;
      }
      if (taken) {
        // The transaction is aborted: end it and read what the holder stored, together.
        const [, [existing]] = await pipelined([conn.sql`ROLLBACK`.execute(), recordStatement(conn.sql, op)]);
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
          conn.sql`UPDATE idempotency_record
                      SET status = ${RECORD.succeed.to}, response_body = ${body}::json, biz_id = ${bizId}, locked_until = NULL,
                          updated_at = clock_timestamp()
                    WHERE user_id = ${op.scope} AND id = ${row?.record_id ?? 0}`.execute(),
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
    if ("failed" in attempt) return storeOrRelease(call, attempt.failed);
    const found = await settle(db, op, attempt.existing, requestFingerprint, config, deadline);
    if (found === "again") {
      // Released, or a two-phase holder still at work: give it a moment, then claim again.
      if (attempt.existing?.status === "PROCESSING") await sleep(10);
      continue;
    }
    if (found.kind === "stored") {
      call.remember(found.outcome);
      return replay<T>(found.outcome, op);
    }
    return executeUnderLease(db, found.lease, op, call.remember);
  }
}

/**
 * After a one-transaction attempt failed (and rolled back: nothing of it is left): a declared refusal is
 * stored as the key's FAILED outcome, unless a duplicate got its own outcome in first (then that one is
 * the answer, for everyone); any other failure leaves the key free, as if the request never came.
 */
async function storeOrRelease<T>(call: Call<T>, error: unknown): Promise<IdempotentResult<T>> {
  const { db, op, config, requestFingerprint } = call;
  if (!(isDomainError(error) && op.storedErrors.includes(error.code))) throw unavailableIfTransient(error);
  const body: StoredError = { code: error.code, message: error.message, meta: error.details.meta };
  const askedAt = performance.now();
  const [stored] = await guard(
    () => db.$client<LeaseRow[]>`
      INSERT INTO idempotency_record
             (user_id, biz_type, idempotency_key, fingerprint, status, response_body, answer_version, expires_at)
      VALUES (${op.scope}, ${op.bizType}, ${op.key}, ${requestFingerprint}, ${RECORD.refuse.to}, ${JSON.stringify(body)}::json,
              ${versionOf(op)}, now() + ${config.ttlMs} * interval '1 millisecond')
      ON CONFLICT (user_id, biz_type, idempotency_key) DO NOTHING
      RETURNING user_id, id AS record_id, lease_version, expires_at,
                greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms`,
  );
  if (stored) {
    const expiresAt = new Date(stored.expires_at);
    call.remember({
      status: "FAILED",
      responseBody: body,
      answerVersion: versionOf(op),
      bizId: null,
      expiresAt,
      remainingMs: stored.remaining_ms,
      askedAt,
    });
    error.details.keyExpiresAt = expiresAt;
    throw error;
  }
  // Someone else's outcome is the key's now: answer it, as any duplicate would.
  const existing = await readRecord(db.$client, op);
  const found = await settle(db, op, existing, requestFingerprint, config, Date.now() + config.waitMs);
  if (found === "again" || found.kind === "owner") {
    if (found !== "again") await release(db.$client, found.lease);
    throw error;
  }
  call.remember(found.outcome);
  return replay<T>(found.outcome, op);
}

/**
 * Two phases: the key first (committed on its own, with a lease), then the outside work with no
 * connection held, then the business transaction fenced by the lease.
 */
async function prepareThenExecute<T>(
  call: Call<T>,
  prepare: () => Promise<void>,
): Promise<IdempotentResult<T>> {
  const { db, op, requestFingerprint, config, remember } = call;
  const acquired = await acquire(db, op, requestFingerprint, config, undefined, call.trace);
  if (acquired.kind === "stored") {
    remember(acquired.outcome);
    return replay<T>(acquired.outcome, op);
  }
  try {
    await prepare();
  } catch (error) {
    return failUnderLease(db, acquired.lease, op, error, remember);
  }
  return executeUnderLease(db, acquired.lease, op, remember);
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
  trace: Trace = { waited: false },
): Promise<Acquired> {
  const sql = db.$client;
  let pause = 10;
  for (;;) {
    const askedAt = performance.now();
    const claimed = await guard(() => claimStatement(sql, ref, requestFingerprint, config));
    const lease = toLease(claimed[0], askedAt);
    if (lease) return { kind: "owner", lease };
    const existing = await readRecord(sql, ref);
    const found = await settle(db, ref, existing, requestFingerprint, config, deadline);
    if (found !== "again") return found;
    if (existing?.status === "PROCESSING") {
      trace.waited = true;
      trace.by = "lease";
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
  ref: KeyRef,
  existing: RecordRow | undefined,
  requestFingerprint: string,
  config: IdempotencyConfig,
  deadline: number,
): Promise<Acquired | "again"> {
  // Released between the claim and the read: the key is free, claim it again.
  if (!existing) return "again";
  const record = { scope: existing.user_id, recordId: Number(existing.id), answerVersion: versionOf(ref) };
  if (existing.expired && !(existing.status === "PROCESSING" && existing.lease_live)) {
    const renewed = await renewExpired(db, record, existing.lease_version, requestFingerprint, config);
    return renewed ? { kind: "owner", lease: renewed } : "again";
  }
  if (existing.fingerprint !== requestFingerprint) throw keyReused();
  const expiresAt = new Date(existing.expires_at);
  if (existing.status !== "PROCESSING") {
    return {
      kind: "stored",
      outcome: {
        status: existing.status,
        responseBody: existing.response_body,
        answerVersion: existing.answer_version,
        bizId: existing.biz_id,
        expiresAt,
        remainingMs: existing.remaining_ms,
        askedAt: existing.askedAt ?? 0,
      },
    };
  }
  if (!existing.lease_live) {
    const taken = await takeOver(db, record, existing.lease_version, config);
    return taken ? { kind: "owner", lease: taken } : "again";
  }
  if (deadline - Date.now() <= 0) throw inProgress(expiresAt);
  return "again";
}

function keyReused(): DomainError {
  return new DomainError(
    "IDEMPOTENCY_KEY_REUSED",
    "This idempotency key was already used with a different request. Use a new key for a new request.",
  );
}

function inProgress(keyExpiresAt: Date | undefined): DomainError {
  return new DomainError(
    "REQUEST_IN_PROGRESS",
    "A request with this idempotency key is still being processed; retry with the same key.",
    { retryable: true, retryAfterMs: 1000, ...(keyExpiresAt ? { keyExpiresAt } : {}) },
  );
}

/** Runs the business writes under a lease obtained earlier (a takeover, a renewal, a test). */
export async function executeUnderLease<T>(
  db: Db,
  lease: Lease,
  op: IdempotentOperation<T>,
  remember: Remember = () => {},
): Promise<IdempotentResult<T>> {
  const conn = await guard(() => holdConnection(db));
  const attempt = await executeInTransaction(conn, lease, op);
  await conn.close({ ended: !("failed" in attempt) });
  if ("failed" in attempt) return failUnderLease(db, lease, op, attempt.failed, remember);
  remember({
    status: "SUCCESS",
    responseBody: attempt.result ?? null,
    answerVersion: versionOf(op),
    bizId: attempt.bizId,
    expiresAt: lease.expiresAt,
    remainingMs: lease.remainingMs,
    askedAt: lease.askedAt,
  });
  return attempt;
}

/**
 * A one-transaction attempt: the record another request stored (the key was taken), or what made it
 * fail (rolled back either way). A two-phase attempt: its result, or what made it fail.
 */
type Attempt = { existing: RecordRow | undefined } | { failed: unknown };
type LeasedAttempt<T> = IdempotentResult<T> | { failed: unknown };

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
): Promise<LeasedAttempt<T>> {
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
      sql`SELECT idempotency_store_outcome(${lease.scope}, ${lease.recordId}, ${lease.leaseVersion}, ${RECORD.succeed.to},
                                           ${JSON.stringify(result ?? null)}::json, ${bizId})`,
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
  remember: Remember = () => {},
): Promise<never> {
  if (isDomainError(error, "IDEMPOTENCY_LEASE_LOST")) throw error;
  const sql = db.$client;
  if (isDomainError(error) && op.storedErrors.includes(error.code)) {
    const body = await storeFailure(sql, lease, error);
    if (body) {
      remember({
        status: "FAILED",
        responseBody: body,
        answerVersion: versionOf(op),
        bizId: null,
        expiresAt: lease.expiresAt,
        remainingMs: lease.remainingMs,
        askedAt: lease.askedAt,
      });
    }
    error.details.keyExpiresAt = lease.expiresAt;
    throw error;
  }
  await release(sql, lease);
  throw unavailableIfTransient(error);
}

function replay<T>(
  outcome: Pick<StoredOutcome, "status" | "responseBody" | "bizId" | "expiresAt" | "answerVersion">,
  op: IdempotentOperation<T>,
): IdempotentResult<T> {
  if (outcome.status === "SUCCESS") {
    // Stored by an older deploy in another shape: read as this code answers it, if it says how.
    const upgrade = outcome.answerVersion < versionOf(op) ? op.upgradeAnswer : undefined;
    return {
      result: upgrade ? upgrade(outcome.responseBody, outcome.answerVersion) : (outcome.responseBody as T),
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

/** The stored body, or undefined when another request took the key over (it stores its own outcome). */
async function storeFailure(sql: Conn, lease: Lease, error: DomainError): Promise<StoredError | undefined> {
  const body: StoredError = { code: error.code, message: error.message, meta: error.details.meta };
  const rows = await guard(
    () => sql`
      UPDATE idempotency_record
         SET status = ${RECORD.fail.to}, response_body = ${JSON.stringify(body)}::json, locked_until = NULL,
             updated_at = now()
       WHERE user_id = ${lease.scope} AND id = ${lease.recordId} AND lease_version = ${lease.leaseVersion}
         AND status = ${onlyFrom(RECORD.fail)}
      RETURNING id`,
  );
  return rows.length > 0 ? body : undefined;
}

/** Best effort: if the database is gone, the lease runs out and the key is taken over instead. */
async function release(sql: Conn, lease: Lease): Promise<void> {
  try {
    await sql`
      DELETE FROM idempotency_record
       WHERE user_id = ${lease.scope} AND id = ${lease.recordId} AND lease_version = ${lease.leaseVersion}
         AND status = ${onlyFrom(RECORD.fail)}`;
  } catch {
    // The original error is the one worth reporting.
  }
}

/** A record by its key: (user_id, id). */
interface RecordKey {
  scope: string;
  recordId: number;
  /** The answer version the new holder's code stores. */
  answerVersion: number;
}

const versionOf = (ref: KeyRef) => ref.answerVersion ?? 1;

async function takeOver(
  db: Db,
  { scope, recordId, answerVersion }: RecordKey,
  seenVersion: number,
  config: IdempotencyConfig,
): Promise<Lease | undefined> {
  // SKIP LOCKED: a holder still inside its transaction keeps the row locked; we wait by polling instead.
  const askedAt = performance.now();
  const rows = await guard(() =>
    db.execute<LeaseRow>(sql`
      UPDATE idempotency_record
         SET lease_version = lease_version + 1, locked_until = ${ms(config.leaseMs)}, updated_at = now(),
             answer_version = ${answerVersion}
       WHERE user_id = ${scope}
         AND id = (SELECT id FROM idempotency_record
                    WHERE user_id = ${scope} AND id = ${recordId} AND status = ${onlyFrom(RECORD.renewLease)}
                      AND lease_version = ${seenVersion}
                      AND locked_until <= now()
                    FOR UPDATE SKIP LOCKED)
      RETURNING user_id, id AS record_id, lease_version, expires_at,
                greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms`),
  );
  return toLease(rows[0], askedAt);
}

async function renewExpired(
  db: Db,
  { scope, recordId, answerVersion }: RecordKey,
  seenVersion: number,
  requestFingerprint: string,
  config: IdempotencyConfig,
): Promise<Lease | undefined> {
  const askedAt = performance.now();
  const rows = await guard(() =>
    db.execute<LeaseRow>(sql`
      UPDATE idempotency_record
         SET lease_version = lease_version + 1, status = ${RECORD.takeOver.to}, fingerprint = ${requestFingerprint},
             response_body = NULL, answer_version = ${answerVersion}, biz_id = NULL, locked_until = ${ms(config.leaseMs)},
             created_at = now(), updated_at = now(), expires_at = ${ms(config.ttlMs)}
       WHERE user_id = ${scope}
         AND id = (SELECT id FROM idempotency_record
                    WHERE user_id = ${scope} AND id = ${recordId} AND lease_version = ${seenVersion}
                      AND expires_at <= now()
                    FOR UPDATE SKIP LOCKED)
      RETURNING user_id, id AS record_id, lease_version, expires_at,
                greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms`),
  );
  return toLease(rows[0], askedAt);
}

function toLease(row: LeaseRow | undefined, askedAt: number): Lease | undefined {
  return row
    ? {
        scope: row.user_id,
        recordId: Number(row.record_id),
        leaseVersion: row.lease_version,
        expiresAt: new Date(row.expires_at),
        remainingMs: Number(row.remaining_ms),
        askedAt,
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
