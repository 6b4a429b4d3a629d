import { OPERATIONS } from "~/server/all-operations";
import { httpStatusOf } from "~/server/error-codes";
import type { AnyOperation } from "~/server/operations";
import { REQUEST_ID_PATTERN } from "~/server/orders/schema";
import { KEY_EXPIRES_HEADER, REPLAYED_HEADER } from "./protocol";

/** Where the policy is published (linked from the OpenAPI document and docs/api.md). */
export const POLICY_PATH = "/api/v1/idempotency-policy";

/**
 * The server's idempotency policy, which the IETF Idempotency-Key draft asks a resource to publish: which
 * operations need a key, its syntax, how long it lives, what is fingerprinted and what a retry is answered.
 * Made from the same operation definitions the routes mount, so it cannot name an operation that is not there.
 */
export function idempotencyPolicy(keyTtlMs: number) {
  return {
    specification: "draft-ietf-httpapi-idempotency-key-header",
    header: "Idempotency-Key",
    key: {
      syntax: 'a Structured Field string ("…"); the bare token is accepted too',
      pattern: REQUEST_ID_PATTERN.source,
      required: true,
      scope: "the bearer token's shopper: the same key from another shopper is another key",
    },
    expiresAfterSeconds: Math.round(keyTtlMs / 1000),
    fingerprint:
      "SHA-256 of the operation's name and the canonical JSON (keys sorted) of the validated request: path parameters and body, the key left out",
    answers: {
      missingKey: { status: 400, code: "IDEMPOTENCY_KEY_MISSING" },
      malformedKey: { status: 400, code: "IDEMPOTENCY_KEY_INVALID" },
      keyReusedWithAnotherRequest: { status: 422, code: "IDEMPOTENCY_KEY_REUSED" },
      firstRequestStillRunning: {
        status: 409,
        code: "REQUEST_IN_PROGRESS",
        headers: ["Retry-After"],
        waits:
          "a copy waits for the first request's answer for up to the server's wait; Prefer: wait=N (RFC 7240) shortens it, wait=0 answers 409 at once",
      },
      retryAfterCompletion: `the stored answer: its status, body and Location, with ${REPLAYED_HEADER}: true; a stored refusal (below) is answered again the same way`,
      everyKeyedAnswer: [KEY_EXPIRES_HEADER],
    },
    operations: (OPERATIONS as readonly AnyOperation[]).flatMap((op) =>
      op.rest
        ? [
            {
              operation: op.name,
              method: op.rest.method,
              path: op.rest.path,
              storedRefusals: op.storedErrors.map((code) => ({
                code,
                status: httpStatusOf(code),
              })),
            },
          ]
        : [],
    ),
  };
}
