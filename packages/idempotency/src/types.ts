import type postgres from "postgres";
import type { Absorber, IdempotencyEvent } from "./events";
import type { ReplayCache } from "./replay-cache";

/**
 * Where the records live and how to reach them: the only things the core takes from the app that mounts it.
 * `Tx` is whatever handle the app's business writes use (a drizzle transaction, a postgres.js connection).
 */
export interface RecordStore<Tx> {
  /** The pool: the core's own statements outside a business transaction. */
  sql: postgres.Sql;
  /** A connection of its own, with the business handle bound to it; the core sends BEGIN and COMMIT itself. */
  hold(): Promise<HeldConnection<Tx>>;
  /** The record table and its fenced store function, as made by recordSchema (./schema.ts). */
  table: string;
  storeOutcome: string;
}

export interface HeldConnection<Tx> {
  tx: Tx;
  /** Raw statements on the same connection (BEGIN, the claim, COMMIT). */
  sql: postgres.ReservedSql;
  /** Gives it back; `ended`: the caller saw its COMMIT or ROLLBACK, so no transaction is open. */
  close(options?: { ended?: boolean }): Promise<void>;
}

/** How batches of first executions are formed (./claim-in-batch.ts); absent from the config: every call runs alone. */
export interface BatchConfig {
  /** The most calls in one transaction. */
  maxSize: number;
  /** The most batches (each on a connection of its own) at once. */
  runners: number;
}

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
  /** Several first executions of `batchable` operations in one transaction (./claim-in-batch.ts; absent: never). */
  batch?: BatchConfig;
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

/**
 * How a key is held while its operation runs (./claim-in-transaction.ts, ./claim-with-lease.ts):
 *   transaction - the claim is a row of the business transaction itself; for work all in this database
 *   lease - the claim commits first, with a lease a duplicate may take over when it runs out; for work
 *           with an outside effect (`prepare`)
 */
export type ClaimKind = "transaction" | "lease";

export interface ExecuteResult<T> {
  result: T;
  /** Id of the business object the operation made, kept on the record for operators. */
  bizId?: string | null;
  /**
   * The business object was there already (its own unique key found it: a request sent again after its key
   * expired): what found it. The call is stored as the key's outcome, and told to the observer as a replay,
   * absorbed by that, not as a first execution.
   */
  absorbedBy?: string;
}

export interface IdempotentOperation<T, Tx> extends KeyRef {
  /** The validated, normalised request; its canonical hash decides "same request". */
  request: unknown;
  /** Business writes. Runs inside the transaction that also stores the outcome. */
  execute: (tx: Tx) => Promise<ExecuteResult<T>>;
  /**
   * A deterministic business refusal, as stored and replayed like a success (absent, or undefined for this
   * error: not one; the key is freed so the same key can run again).
   */
  refusal?: (error: unknown) => StoredRefusal | undefined;
  /**
   * Work outside this database that must precede the business transaction. It runs once
   * the key is held (so duplicates wait for, or replay, the holder instead of repeating
   * it), outside any transaction, and must be idempotent by its own key: a holder that
   * crashed is taken over, and the taker runs it again.
   */
  prepare?: () => Promise<void>;
  /** How the key is held; default: `lease` with `prepare`, else `transaction` (one commit). */
  claim?: ClaimKind;
  /**
   * May share its transaction with other calls' (`config.batch`): its business statements take no row lock
   * another call could hold, and wait on no other key than its own, so calls in one transaction cannot deadlock.
   */
  batchable?: boolean;
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

/**
 * One request as its transport holds it, before it is read (`serveIdempotent`): its key, the text it came as,
 * how to read it into its operation, and how its answer is sent. With a replay cache, a copy of a text this
 * instance answered before is answered with that answer's rendering, and the request is never read.
 */
export interface IdempotentRequest<T, Tx, R> extends KeyRef {
  /**
   * All that decides the operation's request besides the scope and the key, as sent (the body, the path's
   * parameters). Absent: every copy is read and run.
   */
  text?: string;
  /** The transport's admission of a copy answered as a known replay (a refusal is thrown). */
  admit?: () => Promise<void>;
  /** The request read and validated: its operation, under its key. Not called for a known replay. */
  operation: () => IdempotentOperation<T, Tx> | Promise<IdempotentOperation<T, Tx>>;
  /** The answer as the transport sends it. */
  render: (result: IdempotentResult<T>) => Rendered<R>;
}

/** A transport's answer to a result. */
export interface Rendered<R> {
  rendering: R;
  /** Its size in characters (what the replay cache counts when it keeps the rendering). */
  chars: number;
  /**
   * It is the answer of a replay, so a copy of the same text may be answered with it (default: the result is a
   * replay). A first answer is never kept: it may say that it is one.
   */
  replayed?: boolean;
}

/** What `serveIdempotent` answers: the rendering, and whether it is a replay's. */
export interface Served<R> {
  rendering: R;
  replayed: boolean;
}

/** Proof of holding a key: every write made under it is conditional on `leaseVersion`. */
export interface Lease extends Held {
  /** The record's key is (user_id, id): its scope and its id. */
  scope: string;
  recordId: number;
  leaseVersion: number;
}

/** A declared refusal as the record stores it, and replays it. */
export interface StoredRefusal {
  code: string;
  message: string;
  meta?: Record<string, unknown>;
}

/** A final outcome under a key: what every later copy is answered; `Held` says when a cache must stop trusting it. */
export interface StoredOutcome extends Held {
  status: "SUCCESS" | "FAILED";
  responseBody: unknown;
  /** `responseBody` as the JSON text stored, where the path that stored it has it at hand. */
  responseText?: string;
  /** The shape it was stored in (KeyRef.answerVersion of the code that stored it). */
  answerVersion: number;
  bizId: string | null;
}

export type Acquired = { kind: "owner"; lease: Lease } | { kind: "stored"; outcome: StoredOutcome };

/** What one call went through, for its observer: whether it waited for another copy of itself, and what answered it. */
export interface Trace {
  waited: boolean;
  by?: Exclude<Absorber, "conflict" | "fingerprint">;
  /** The execution found its business object there already (ExecuteResult.absorbedBy). */
  business?: string;
  /** When the call reached its key (Date.now()): a known replay admitted, or the request read. Failures before are not told. */
  begunAt?: number;
  /** The run's answer, before the transport renders it: a rendering that fails does not unsay it. */
  ran?: { replayed: boolean; at: number };
}

/** How long a key is held or kept, as the statement that held or stored it saw it (a Lease is one). */
export interface Held {
  expiresAt: Date;
  /** How long the key still lives, as the database computed it (the replay cache's clock). */
  remainingMs: number;
  /** performance.now() before that statement was sent. */
  askedAt: number;
}

/** What a claim path answers: the call's result, and the outcome now final under its key (./look-up.ts keeps it). */
export interface Answered<T> {
  result: IdempotentResult<T>;
  outcome: StoredOutcome;
}

/** One call on its way through the phases. */
export interface Call<T, Tx> {
  store: RecordStore<Tx>;
  op: IdempotentOperation<T, Tx>;
  requestFingerprint: string;
  config: IdempotencyConfig;
  trace: Trace;
}

export const versionOf = (ref: { answerVersion?: number }) => ref.answerVersion ?? 1;
