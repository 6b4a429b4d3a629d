import type { Logger } from "pino";
import { isTransientError } from "~/shared/postgres-driver";
import { SIGNATURE_HEADER } from "~/shared/provider-contract";
import { isMockPayError } from "./errors";

/** MockPay's own small HTTP helpers: its APIs answer signed JSON, its forms answer redirects. */
export function signedJson(answer: { status: number; body: string; signature: string | null }): Response {
  const headers: Record<string, string> = { "content-type": "application/json", "cache-control": "no-store" };
  if (answer.signature) headers[SIGNATURE_HEADER] = answer.signature;
  return new Response(answer.body, { status: answer.status, headers });
}

export function redirect(location: string): Response {
  return new Response(null, { status: 303, headers: { location } });
}

/**
 * A failure as MockPay answers it: its own refusals as 404/400, a database that is away as
 * a 503 the caller may retry, anything else a 500 (logged once).
 */
export function failure(error: unknown, log: Logger, what: string): Response {
  if (isMockPayError(error)) {
    return Response.json(
      { code: error.code, message: error.message },
      { status: error.code === "NOT_FOUND" ? 404 : 400 },
    );
  }
  if (isTransientError(error)) {
    return Response.json(
      { code: "TRY_AGAIN", message: "MockPay is briefly unavailable; try again." },
      { status: 503, headers: { "retry-after": "1" } },
    );
  }
  log.error({ err: error }, `MockPay: ${what} failed`);
  return Response.json({ code: "INTERNAL", message: "internal error" }, { status: 500 });
}
