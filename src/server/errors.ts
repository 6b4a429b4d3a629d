/**
 * Every failure a service can explain. Transport adapters (tRPC, REST) map these
 * codes in exactly one place each; anything that is not a DomainError is an
 * internal error.
 */
export const DOMAIN_ERROR_CODES = [
  "INVALID_INPUT",
  "UNAUTHORIZED",
  "IDEMPOTENCY_KEY_REUSED",
  "REQUEST_IN_PROGRESS",
  "IDEMPOTENCY_LEASE_LOST",
  "SERVICE_UNAVAILABLE",
  "SKU_NOT_FOUND",
  "OUT_OF_STOCK",
  "ORDER_NOT_FOUND",
  "ORDER_NOT_PAYABLE",
  "ORDER_NOT_REFUNDABLE",
  "REFUND_EXCEEDS_PAID",
  "RATE_LIMITED",
] as const;

export type DomainErrorCode = (typeof DOMAIN_ERROR_CODES)[number];

export interface DomainErrorDetails {
  /** The client may send the same request again (with the same key) later. */
  retryable?: boolean;
  retryAfterMs?: number;
  /** This error is the stored outcome of an earlier request with the same key. */
  replayed?: boolean;
  /** When the idempotency key of the request expires (so a client knows how long it may retry). */
  keyExpiresAt?: Date;
  /** Extra facts for the client, e.g. which SKU is out of stock. */
  meta?: Record<string, unknown>;
}

const DOMAIN_ERROR = Symbol.for("exactly-once-checkout.DomainError");

export class DomainError extends Error {
  /**
   * By brand, not by prototype: the production server and Next's bundle each load
   * this module, and an error thrown by one copy must still be recognised by the other.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === "object" && value !== null && DOMAIN_ERROR in value;
  }

  readonly [DOMAIN_ERROR] = true;
  override readonly name = "DomainError";
  readonly code: DomainErrorCode;
  readonly details: DomainErrorDetails;

  constructor(
    code: DomainErrorCode,
    message: string,
    details: DomainErrorDetails = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.code = code;
    this.details = details;
  }

  get retryable(): boolean {
    return this.details.retryable ?? false;
  }
}

export function isDomainError(error: unknown, code?: DomainErrorCode): error is DomainError {
  return error instanceof DomainError && (code === undefined || error.code === code);
}

const CONNECTION_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
]);
/** SQLSTATE classes that mean "try again", not "your request is wrong". */
// serialization failure, deadlock, lock not available, statement timeout, admin shutdown, too many connections
const TRANSIENT_SQLSTATES = new Set(["40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03", "53300"]);

/** Database unreachable, connection lost, serialization failure: worth retrying. */
export function isTransientError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") {
      if (CONNECTION_ERROR_CODES.has(code) || TRANSIENT_SQLSTATES.has(code)) return true;
      if (code.startsWith("08")) return true; // connection exception class
    }
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The one translation of "the database went away" into the answer clients retry on:
 * a transient failure that is not already a DomainError becomes SERVICE_UNAVAILABLE;
 * anything else is returned as it is.
 */
export function unavailableIfTransient(error: unknown): unknown {
  return !isDomainError(error) && isTransientError(error) ? serviceUnavailable(error) : error;
}

export function serviceUnavailable(cause: unknown): DomainError {
  return new DomainError(
    "SERVICE_UNAVAILABLE",
    "The service is temporarily unavailable; retry the same request with the same key.",
    { retryable: true, retryAfterMs: 1000 },
    { cause },
  );
}
