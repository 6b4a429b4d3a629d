import { isTransientError } from "./postgres";
import type { KeyRef, StoredOutcome, StoredRefusal } from "./types";

/** What a refusal tells the client beyond its code. */
export interface RefusalDetails {
  /** The client may send the same request again (with the same key) later. */
  retryable?: boolean;
  retryAfterMs?: number;
  /** This refusal is the stored outcome of an earlier request with the same key. */
  replayed?: boolean;
  /** When the key is forgotten (so a client knows how long it may retry). */
  keyExpiresAt?: Date;
  /** Extra facts for the client, e.g. which SKU is out of stock. */
  meta?: Record<string, unknown>;
}

/**
 * Every refusal the core answers: its own (a key reused with another request, a copy still running, a lease
 * lost, the database away) and a business refusal the operation declared, stored and replayed. The app turns
 * it into its own error type in one place (src/server/operations/record-store.ts).
 */
export class IdempotencyError extends Error {
  override readonly name = "IdempotencyError";

  constructor(
    readonly code: string,
    message: string,
    readonly details: RefusalDetails = {},
    options?: ErrorOptions,
    /** The outcome stored under the key that this refusal answers (a declared refusal, stored or replayed), and that key. */
    readonly outcome?: { of: KeyRef; stored: StoredOutcome },
  ) {
    super(message, options);
  }
}

/** The key holds another request's answer until `keyExpiresAt` (told to the client, as on every keyed answer). */
export function keyReused(keyExpiresAt: Date): IdempotencyError {
  return new IdempotencyError(
    "IDEMPOTENCY_KEY_REUSED",
    "This idempotency key was already used with a different request. Use a new key for a new request.",
    { keyExpiresAt },
  );
}

export function inProgress(keyExpiresAt: Date | undefined): IdempotencyError {
  return new IdempotencyError(
    "REQUEST_IN_PROGRESS",
    "A request with this idempotency key is still being processed; retry with the same key.",
    { retryable: true, retryAfterMs: 1000, ...(keyExpiresAt ? { keyExpiresAt } : {}) },
  );
}

export function leaseLost(): IdempotencyError {
  return new IdempotencyError(
    "IDEMPOTENCY_LEASE_LOST",
    "This request took too long and another request with the same key took over; retry with the same key to get its result.",
    { retryable: true, retryAfterMs: 500 },
  );
}

/** The database went away: a failure the client retries with the same key, never an internal error. */
export function unavailableIfTransient(error: unknown): unknown {
  return !(error instanceof IdempotencyError) && isTransientError(error)
    ? new IdempotencyError(
        "SERVICE_UNAVAILABLE",
        "The service is temporarily unavailable; retry the same request with the same key.",
        { retryable: true, retryAfterMs: 1000 },
        { cause: error },
      )
    : error;
}

/** Fail closed: when the record cannot be read or written, the operation does not run. */
export async function guard<R>(statement: () => Promise<R>): Promise<R> {
  try {
    return await statement();
  } catch (error) {
    throw unavailableIfTransient(error);
  }
}

/** A stored refusal, answered again (`outcome`: the record it was read from, and its key, when the record was read). */
export function replayedRefusal(
  stored: StoredRefusal,
  keyExpiresAt: Date,
  outcome?: { of: KeyRef; stored: StoredOutcome },
): IdempotencyError {
  return new IdempotencyError(
    stored.code,
    stored.message,
    { replayed: true, meta: stored.meta, keyExpiresAt },
    undefined,
    outcome,
  );
}

/** A declared refusal, stored under the key `of` just now: the client learns how long the key keeps it. */
export function storedRefusal(of: KeyRef, outcome: StoredOutcome, cause: unknown): IdempotencyError {
  const stored = outcome.responseBody as StoredRefusal;
  return new IdempotencyError(
    stored.code,
    stored.message,
    { meta: stored.meta, keyExpiresAt: outcome.expiresAt },
    { cause },
    { of, stored: outcome },
  );
}
