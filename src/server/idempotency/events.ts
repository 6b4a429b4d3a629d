/**
 * What the core tells its observer (logs, metrics) about each call. The core owns
 * these types, so it depends on nothing above it; observability reads them.
 */
/** What happened to one idempotent call. */
export type IdempotencyOutcome =
  | "first"
  | "replayed"
  /** A duplicate that arrived while the first was running, waited for it, and got its answer. */
  | "waited"
  | "stored_error"
  | "replayed_error"
  | "conflict"
  | "mismatch"
  | "released"
  | "unavailable";

export interface IdempotencyEvent {
  bizType: string;
  key: string;
  scope: string;
  outcome: IdempotencyOutcome;
  durationMs: number;
}
