import { problemSlug } from "~/shared/problem";
import type { DomainErrorCode } from "./errors";

export { problemSlug };

/** The tRPC codes a domain code maps to, by tRPC's own names (the router hands them to TRPCError as they are). */
type TrpcCode =
  | "BAD_REQUEST"
  | "UNAUTHORIZED"
  | "NOT_FOUND"
  | "CONFLICT"
  | "PRECONDITION_FAILED"
  | "UNPROCESSABLE_CONTENT"
  | "TOO_MANY_REQUESTS"
  | "SERVICE_UNAVAILABLE";

/**
 * The one table of what every code the API refuses with stands for: for a domain code, its HTTP status (REST)
 * and its tRPC code; for every code, what it means and what the client should do about it, shown at
 * `/problems/<type>` (RFC 9457: a type's URI should lead to documentation a person can read). Every domain code
 * has an entry (the type says so), and so does every code the HTTP layer answers with itself;
 * test/problem-types.test.ts holds the second list to the codes the source answers with.
 */
export interface ProblemType {
  /** The HTTP status it comes with. */
  status: number;
  /** What happened, in the client's terms. */
  means: string;
  /** What the client should do next. */
  todo: string;
  /** The same request with the same key can succeed later. */
  retry: "same key" | "never" | "after fixing the request";
}

export const DOMAIN_CODES: Record<DomainErrorCode, ProblemType & { trpc: TrpcCode }> = {
  INVALID_INPUT: {
    status: 400,
    trpc: "BAD_REQUEST",
    means: "The body or parameters are not what the operation takes; `detail` says what is wrong.",
    todo: "Fix the request, and send the corrected one under a new Idempotency-Key: a key stands for one request.",
    retry: "after fixing the request",
  },
  UNAUTHORIZED: {
    status: 401,
    trpc: "UNAUTHORIZED",
    means: "No valid credential: the bearer token is missing, expired, revoked or not genuine.",
    todo: "Send a valid token as `Authorization: Bearer …` (POST /api/v1/tokens makes a new shopper and its token).",
    retry: "after fixing the request",
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: 422,
    trpc: "UNPROCESSABLE_CONTENT",
    means:
      "This Idempotency-Key (or refund number) was used before for a different request: another body, another order, another amount.",
    todo: "A new intent needs a new key. To learn the first request's answer, send that same request again with this key.",
    retry: "never",
  },
  REQUEST_IN_PROGRESS: {
    status: 409,
    trpc: "CONFLICT",
    means:
      "A request with this key is running now, and did not finish within the time this copy waited for it (or, for a cancel, a payment of the order was opened meanwhile).",
    todo: "Send the same request with the same key again after Retry-After: it answers what the first one did.",
    retry: "same key",
  },
  IDEMPOTENCY_LEASE_LOST: {
    status: 409,
    trpc: "CONFLICT",
    means:
      "This request held the key too long and another copy took it over; the other copy's outcome is the key's.",
    todo: "Send the same request with the same key again: it answers the outcome the key holds.",
    retry: "same key",
  },
  SERVICE_UNAVAILABLE: {
    status: 503,
    trpc: "SERVICE_UNAVAILABLE",
    means:
      "The service could not finish the request now (the database or the payment provider is away). Nothing was committed for this key.",
    todo: "Send the same request with the same key again after Retry-After. The key makes the retry safe.",
    retry: "same key",
  },
  SKU_NOT_FOUND: {
    status: 400,
    trpc: "BAD_REQUEST",
    means: "A line names a SKU the catalogue does not have.",
    todo: "Take SKUs from the catalogue, and send the corrected order under a new key.",
    retry: "after fixing the request",
  },
  OUT_OF_STOCK: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means:
      "Not enough stock for a line (`meta` names the SKU and what is left). No order was placed; this answer is stored for the key.",
    todo: "Order fewer, or later, under a new key: the same key replays this answer.",
    retry: "never",
  },
  ORDER_NOT_FOUND: {
    status: 404,
    trpc: "NOT_FOUND",
    means: "No such order for this shopper (an order of another shopper is not found either).",
    todo: "Check the order id, and the credential: it must be the order's shopper's.",
    retry: "never",
  },
  ORDER_NOT_PAYABLE: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means: "The order no longer awaits payment: it is paid, shipped, short of stock, closed or refunded.",
    todo: "Read the order (GET /api/v1/orders/{orderId}) to see where it stands.",
    retry: "never",
  },
  ORDER_NOT_CANCELLABLE: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means:
      "The order cannot be cancelled in its state: it is paid, shipped, short of stock or refunded (cancelling a closed order again succeeds).",
    todo: "Read the order; a paid order is refunded, not cancelled.",
    retry: "never",
  },
  ORDER_NOT_REFUNDABLE: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means: "The order has no successful payment to refund.",
    todo: "Read the order: only a paid order can be refunded.",
    retry: "never",
  },
  REFUND_EXCEEDS_PAID: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means:
      "The refund asks for more than is left to refund (`meta` gives what was paid and refunded; when a coupon this order earned was spent on another order, its value stays with this one and `meta` gives what is refundable).",
    todo: "Ask for at most what is left, under a new refund number.",
    retry: "never",
  },
  REFUND_LINES_INVALID: {
    status: 422,
    trpc: "UNPROCESSABLE_CONTENT",
    means:
      "A refund line names a SKU the order does not have, more units than are left of it, or an amount other than what the lines were paid.",
    todo: "Name lines of the order and no more units than are left; leave the amount out (it is computed). Send it under a new refund number: this answer is stored for this one.",
    retry: "after fixing the request",
  },
  COUPON_NOT_FOUND: {
    status: 422,
    trpc: "UNPROCESSABLE_CONTENT",
    means: "No coupon with this code belongs to this shopper.",
    todo: "Check the code, or place the order without a coupon, under a new key.",
    retry: "never",
  },
  COUPON_NOT_APPLICABLE: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means:
      "The coupon cannot be applied to this order: it was revoked (the order that earned it was refunded), or the order is not worth more than the coupon.",
    todo: "Place the order without it, or with another coupon, under a new key.",
    retry: "never",
  },
  COUPON_ALREADY_USED: {
    status: 412,
    trpc: "PRECONDITION_FAILED",
    means: "The coupon is spent on another order.",
    todo: "Place the order without it, under a new key.",
    retry: "never",
  },
  RATE_LIMITED: {
    status: 429,
    trpc: "TOO_MANY_REQUESTS",
    means: "Too many requests from this client or for this key within a short window (the gateway's limit).",
    todo: "Wait Retry-After seconds, then send the same request with the same key.",
    retry: "same key",
  },
};

/** The codes the HTTP layer answers with itself, before or around an operation. */
const HTTP_CODES: Record<string, ProblemType> = {
  IDEMPOTENCY_KEY_MISSING: {
    status: 400,
    means: "A POST of the REST API needs an Idempotency-Key header.",
    todo: "Make a key once per intent (a UUID), and send it with the request and with every retry of it.",
    retry: "after fixing the request",
  },
  IDEMPOTENCY_KEY_INVALID: {
    status: 400,
    means: "The Idempotency-Key header is not a key this API takes (`detail` says why).",
    todo: "Send a UUID made once per intent.",
    retry: "after fixing the request",
  },
  MALFORMED_JSON: {
    status: 400,
    means: "The body is not valid JSON.",
    todo: "Send a JSON body with `content-type: application/json`.",
    retry: "after fixing the request",
  },
  MALFORMED_REQUEST: {
    status: 400,
    means:
      "The request itself is not valid HTTP for this server: its Host header is not a host, or its path does not decode.",
    todo: "Fix the client or proxy that builds the request.",
    retry: "after fixing the request",
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    means:
      "The body is larger than this route takes. Past 2 MiB the server stops reading and closes the connection after this answer.",
    todo: "Send a smaller body (on a new connection, if this one was closed).",
    retry: "after fixing the request",
  },
  TOKENS_DISABLED: {
    status: 403,
    means: "Making API tokens through the API is turned off on this server.",
    todo: "Ask the operator for a token, or use the app's own session.",
    retry: "never",
  },
  INTERNAL_ERROR: {
    status: 500,
    means: "Something failed that the service cannot explain; it is logged for the operator.",
    todo: "Send the same request with the same key again later: if the first run committed, the key replays it.",
    retry: "same key",
  },
};

/** Every problem type the API answers with, by code. */
export const PROBLEM_TYPES: Record<string, ProblemType> = { ...DOMAIN_CODES, ...HTTP_CODES };

/** The HTTP status of a domain code (the REST API's answers, its OpenAPI document and its policy). */
export const httpStatusOf = (code: DomainErrorCode): number => DOMAIN_CODES[code].status;

/** The tRPC code of a domain code. */
export const trpcCodeOf = (code: DomainErrorCode): TrpcCode => DOMAIN_CODES[code].trpc;

/** The code of a `type` slug, when it names one. */
export function problemOfSlug(slug: string): { code: string; type: ProblemType } | undefined {
  const code = slug.toUpperCase().replaceAll("-", "_");
  const type = PROBLEM_TYPES[code];
  return type ? { code, type } : undefined;
}
