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

/**
 * What absorbed a copy that took no effect, in words a story can show: the mechanism that answered it
 * instead of running it again.
 */
export const ABSORBERS = {
  cache: "the replay cache (this instance's memory of the key's answer)",
  known: "the replay cache's rendering (this very request answered before: sent again as it was)",
  flight: "the replay cache's single flight (waited for the copy running in this instance)",
  record: "the idempotency record (its stored answer)",
  lease: "the idempotency record's lease (waited for the copy holding it)",
  claim: "the idempotency record's unique key (waited for the holder's commit)",
  conflict: "the idempotency record's lease (409: the first copy still running)",
  fingerprint: "the request fingerprint (422: another request under this key)",
} as const;
export type Absorber = keyof typeof ABSORBERS;

export interface IdempotencyEvent {
  bizType: string;
  key: string;
  scope: string;
  outcome: IdempotencyOutcome;
  durationMs: number;
  /** For a copy that took no effect: what answered it (ABSORBERS, or a natural key's unique index or conditional update). */
  absorbedBy?: string;
}
