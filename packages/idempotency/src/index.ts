/**
 * The idempotency core: run an operation once per key on PostgreSQL, whatever the copies, crashes and
 * retries (docs/idempotency.md). It imports nothing from the app that mounts it (a lint rule holds that):
 * the app hands it a RecordStore (its pool, a way to hold a connection, the table's names), an operation
 * and a config (its observer, its replay cache). It is the package @exactly-once/idempotency
 * (packages/idempotency/README.md); examples/plain-node mounts it in a bare node:http server.
 */

export { claimOf } from "./claim";
export { type BatchStats, batchStats } from "./claim-in-batch";
export { acquire, executeUnderLease } from "./claim-with-lease";
export { IdempotencyError, type RefusalDetails } from "./errors";
export { ABSORBERS, type Absorber, type IdempotencyEvent, type IdempotencyOutcome } from "./events";
export { type DeleteExpiredOptions, deleteExpired } from "./expire";
export { canonicalJson, fingerprint } from "./fingerprint";
export {
  answerIdempotently,
  type FieldKey,
  type HttpAnswer,
  type HttpCall,
  IDEMPOTENCY_KEY_FIELD,
  type IdempotentRoute,
  keyOfField,
  REPLAYED_FIELD,
  requestInvalid,
} from "./http-binding";
export { RECORD_MACHINE, RECORD_STATUSES, type RecordStatus } from "./machine";
export { isTransientError } from "./postgres";
export {
  type CachedOutcome,
  DEFAULT_REPLAY_CACHE_OPTIONS,
  ReplayCache,
  type ReplayCacheOptions,
} from "./replay-cache";
export { runIdempotent, serveIdempotent } from "./run";
export { recordSchema } from "./schema";
export { postgresStore } from "./store";
export {
  type Acquired,
  type Answered,
  type BatchConfig,
  type Call,
  type ClaimKind,
  DEFAULT_IDEMPOTENCY_CONFIG,
  type ExecuteResult,
  type HeldConnection,
  type IdempotencyConfig,
  type IdempotentOperation,
  type IdempotentRequest,
  type IdempotentResult,
  type KeyRef,
  type Lease,
  type RecordStore,
  type Rendered,
  type Served,
  type StoredRefusal,
} from "./types";
