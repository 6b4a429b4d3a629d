import { isTransientError } from "~/shared/postgres-driver";

export { isTransientError };

/**
 * Every failure a service can explain. One table (./error-codes.ts) gives each its HTTP status, its tRPC
 * code and its problem page, and both transports read it; anything that is not a DomainError is an
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
  "ORDER_NOT_CANCELLABLE",
  "ORDER_NOT_REFUNDABLE",
  "REFUND_EXCEEDS_PAID",
  "REFUND_LINES_INVALID",
  "COUPON_NOT_FOUND",
  "COUPON_NOT_APPLICABLE",
  "COUPON_ALREADY_USED",
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
