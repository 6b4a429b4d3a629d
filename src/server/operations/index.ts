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
} from "@exactly-once/idempotency";
export {
  type AnyOperation,
  defineOperation,
  type Executed,
  gatewayKeyOf,
  keyOfCall,
  keyOfRawInput,
  type Operation,
  type OperationContext,
  type OperationKey,
  type RestBinding,
} from "./define";
export { type CleanupOptions, deleteExpiredRecords } from "./expired-records";
export {
  acquire,
  batchStatsOf,
  executeUnderLease,
  type IdempotentOperation,
  recordStore,
  runIdempotent,
  serveIdempotent,
} from "./record-store";
export {
  type OperationAnswer,
  type OperationCall,
  runOperation,
  type ServedRequest,
  serveOperation,
} from "./run-operation";
