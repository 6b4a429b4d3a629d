export {
  type Acquired,
  type BatchStats,
  DEFAULT_IDEMPOTENCY_CONFIG,
  DEFAULT_REPLAY_CACHE_OPTIONS,
  fingerprint,
  type IdempotencyConfig,
  type IdempotentResult,
  type KeyRef,
  type Lease,
  ReplayCache,
  type ReplayCacheOptions,
} from "~/idempotency";
export { type CleanupOptions, deleteExpiredRecords } from "./cleanup";
export {
  type AnyOperation,
  defineOperation,
  type Executed,
  gatewayKeyOf,
  keepAnswer,
  keyOfCall,
  knownAnswer,
  type Operation,
  type OperationAnswer,
  type OperationCall,
  type OperationContext,
  type OperationKey,
  type RestBinding,
  runOperation,
} from "./operation";
export {
  acquire,
  batchStatsOf,
  executeUnderLease,
  type IdempotentOperation,
  recordStore,
  runIdempotent,
} from "./run";
