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
