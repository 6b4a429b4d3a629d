export { type CleanupOptions, deleteExpiredRecords } from "./cleanup";
export { canonicalJson, fingerprint } from "./fingerprint";
export {
  type Acquired,
  acquire,
  DEFAULT_IDEMPOTENCY_CONFIG,
  executeUnderLease,
  type IdempotencyConfig,
  type IdempotentOperation,
  type IdempotentResult,
  type KeyRef,
  type Lease,
  runIdempotent,
} from "./idempotency";
export {
  type AnyOperation,
  defineOperation,
  type Executed,
  gatewayKeyOf,
  keyOfCall,
  type Operation,
  type OperationAnswer,
  type OperationCall,
  type OperationContext,
  type OperationKey,
  type RestBinding,
  runOperation,
} from "./operation";
export { DEFAULT_REPLAY_CACHE_OPTIONS, ReplayCache, type ReplayCacheOptions } from "./replay-cache";
