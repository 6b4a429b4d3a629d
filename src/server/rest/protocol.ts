import { keyOfField } from "@exactly-once/idempotency";
import { type RequestContext, requestIdOf, requestOf } from "~/server/admission/admission";
import type { AppContext } from "~/server/app-context";
import { httpStatusOf } from "~/server/error-codes";
import { DomainError, isDomainError, unavailableIfTransient } from "~/server/errors";
import { requestIdSchema } from "~/server/orders/schema";
import { jsonAnswer, type PlainRequest, type PlainResponse } from "~/shared/plain-http";
import { PROBLEM_HEADERS, problemBody } from "~/shared/problem";

/** The one mapping from domain codes to HTTP statuses for the REST API (the tRPC one mirrors it). */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
/** Documented response header: when the request's idempotency key expires (an HTTP date). */
export const KEY_EXPIRES_HEADER = "Idempotency-Key-Expires";
export const REPLAYED_HEADER = "Idempotent-Replayed";

interface KeyedAnswer {
  replayed?: boolean;
  keyExpiresAt?: Date;
}

export function keyHeaders(answer: KeyedAnswer): Record<string, string> {
  return {
    ...(answer.keyExpiresAt ? { [KEY_EXPIRES_HEADER]: answer.keyExpiresAt.toUTCString() } : {}),
    ...(answer.replayed ? { [REPLAYED_HEADER]: "true" } : {}),
  };
}

export const json = jsonAnswer;

/** RFC 9457 problem details. */
export function problem(
  status: number,
  code: string,
  detail: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): PlainResponse {
  return {
    status,
    headers: { ...PROBLEM_HEADERS, ...headers },
    body: JSON.stringify(problemBody(status, code, detail, extra)),
  };
}

/** Domain errors become problems; a stored rejection replays with its status and the replay header. */
export function errorResponse(thrown: unknown, log: (error: unknown) => void): PlainResponse {
  // A database that dropped the connection or timed out is a retryable 503, wherever it happened.
  const error = unavailableIfTransient(thrown);
  if (isDomainError(error)) {
    const status = httpStatusOf(error.code);
    const headers: Record<string, string> = keyHeaders({
      replayed: error.details.replayed,
      keyExpiresAt: error.details.keyExpiresAt,
    });
    if (error.details.retryAfterMs)
      headers["retry-after"] = String(Math.ceil(error.details.retryAfterMs / 1000));
    return problem(
      status,
      error.code,
      error.message,
      error.details.meta ? { meta: error.details.meta } : {},
      headers,
    );
  }
  log(error);
  return problem(500, "INTERNAL_ERROR", "Internal server error");
}

export class HttpProblem extends Error {
  constructor(readonly response: PlainResponse) {
    super("http problem");
  }
}

/**
 * The shopper behind `Authorization: Bearer <token>` (genuine, unexpired, not revoked), or a 401 problem; the
 * request under the id `respond` answers with.
 */
export async function authenticate(
  req: PlainRequest,
  app: AppContext,
  requestId: string,
): Promise<RequestContext & { userId: string }> {
  const request = await requestOf(
    app,
    req.headers,
    { credential: "bearer", databaseAway: "refuse" },
    requestId,
  );
  if (!request.shopper) {
    throw new HttpProblem(
      problem(
        401,
        "UNAUTHORIZED",
        "A valid bearer token is required: tokens expire, and can be revoked (POST /api/v1/tokens makes one).",
        {},
        {
          "www-authenticate": 'Bearer realm="checkout"',
        },
      ),
    );
  }
  return { ...request, userId: request.shopper.userId };
}

/**
 * The Idempotency-Key of a POST: required, 8-128 URL-safe characters. The IETF
 * draft sends it as a structured-field string ("…"); Stripe sends it bare. Both work.
 */
export function idempotencyKey(req: PlainRequest): string {
  // The field read as the core's HTTP binding reads it (an sf-string or a bare token), then held to this
  // API's own key syntax.
  const field = keyOfField(req.headers.get(IDEMPOTENCY_KEY_HEADER));
  if ("refused" in field) {
    throw new HttpProblem(
      field.refused === "IDEMPOTENCY_KEY_MISSING"
        ? problem(400, field.refused, "This request needs an Idempotency-Key header (e.g. a UUID).")
        : problem(400, field.refused, field.detail),
    );
  }
  const parsed = requestIdSchema.safeParse(field.key);
  if (!parsed.success) {
    throw new HttpProblem(
      problem(400, "IDEMPOTENCY_KEY_INVALID", parsed.error.issues[0]?.message ?? "invalid Idempotency-Key"),
    );
  }
  return parsed.data;
}

/** The JSON body, or a 400 problem. */
export async function jsonBody(req: PlainRequest): Promise<unknown> {
  const text = await req.text();
  if (text.length > 64 * 1024)
    throw new HttpProblem(problem(413, "PAYLOAD_TOO_LARGE", "The body is too large."));
  try {
    return text === "" ? {} : JSON.parse(text);
  } catch {
    throw new HttpProblem(problem(400, "MALFORMED_JSON", "The body is not valid JSON."));
  }
}

export function invalid(issues: { path: PropertyKey[]; message: string }[]): DomainError {
  return new DomainError(
    "INVALID_INPUT",
    issues.map((issue) => `${issue.path.map(String).join(".") || "body"}: ${issue.message}`).join("; "),
  );
}

export interface RestDeps {
  app: AppContext;
  tokensEnabled: boolean;
  logError: (error: unknown) => void;
}

/**
 * Runs a REST handler under the request's id (`work` is handed it, for the log lines it makes), and answers
 * every failure as a problem (logged once when unknown).
 */
export async function respond(
  deps: RestDeps,
  req: PlainRequest,
  work: (requestId: string) => Promise<PlainResponse>,
): Promise<PlainResponse> {
  const requestId = requestIdOf(req.headers);
  try {
    const response = await work(requestId);
    response.headers["x-request-id"] = requestId;
    return response;
  } catch (error) {
    if (error instanceof HttpProblem) return error.response;
    return errorResponse(error, (err) => deps.logError({ err, requestId }));
  }
}
