import { STATUS_CODES } from "node:http";
import { IdempotencyError } from "./errors";
import { serveIdempotent } from "./run";
import type { IdempotencyConfig, IdempotentOperation, RecordStore } from "./types";

/**
 * The core bound to HTTP, for any framework (./adapters/ mounts it in Express, Fastify and Hono): the key from
 * the Idempotency-Key field, the operation run once per key, the answer with `Idempotent-Replayed`, and
 * refusals as problem details (RFC 9457).
 */

export const IDEMPOTENCY_KEY_FIELD = "idempotency-key";
export const REPLAYED_FIELD = "idempotent-replayed";

/** What an Idempotency-Key field value holds: a key, or why it holds none. */
export type FieldKey =
  | { key: string }
  | { refused: "IDEMPOTENCY_KEY_MISSING" | "IDEMPOTENCY_KEY_INVALID"; detail: string };

/**
 * The key of an Idempotency-Key field: an sf-string (`"…"`, draft-ietf-httpapi-idempotency-key-header-09 §2.1)
 * or a bare token of visible characters, 1 to 255 of them. Two fields (or a list) are refused: a key is one item.
 */
export function keyOfField(value: string | readonly string[] | null | undefined): FieldKey {
  if (value === null || value === undefined) {
    return { refused: "IDEMPOTENCY_KEY_MISSING", detail: "This request needs an Idempotency-Key header." };
  }
  if (typeof value !== "string") {
    if (value.length !== 1) return invalid("The Idempotency-Key header is sent once.");
    return keyOfField(value[0]);
  }
  const text = value.trim();
  const key = text.startsWith('"')
    ? sfString(text)
    : /^[\x21-\x7e]+$/.test(text) && !text.includes(",")
      ? text
      : undefined;
  if (key === undefined)
    return invalid('The Idempotency-Key is one sf-string ("...") or one token of visible characters.');
  if (key.length === 0 || key.length > 255) return invalid("The Idempotency-Key holds 1 to 255 characters.");
  return { key };
}

const invalid = (detail: string): FieldKey => ({ refused: "IDEMPOTENCY_KEY_INVALID", detail });

/** An sf-string (RFC 9651 §3.3.3) and nothing after it; undefined when the text is not one. */
function sfString(text: string): string | undefined {
  let out = "";
  for (let i = 1; i < text.length; i++) {
    const c = text[i] as string;
    if (c === "\\") {
      const next = text[++i];
      if (next !== '"' && next !== "\\") return undefined;
      out += next;
    } else if (c === '"') {
      return i === text.length - 1 ? out : undefined;
    } else if (c < " " || c > "~") {
      return undefined;
    } else {
      out += c;
    }
  }
  return undefined;
}

/** Thrown by a route's `operation` for a request that does not validate: answered 400, and nothing runs. */
export function requestInvalid(detail: string): IdempotencyError {
  return new IdempotencyError("REQUEST_INVALID", detail);
}

/** An HTTP answer, for the adapter to send as its framework sends one. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  /** The JSON text to send: the result, or a problem (then `headers["content-type"]` is application/problem+json). */
  body: string;
}

/** One request, as the adapter read it from its framework. */
export interface HttpCall {
  /** The Idempotency-Key field value(s) as received. */
  keyField: string | readonly string[] | null | undefined;
  /** Whose key: the authenticated caller. Keys never match across scopes. */
  scope: string;
}

/** A route bound to the core: its operation for a request, and how its answers are sent. */
export interface IdempotentRoute<T, Tx, Req> {
  /** The operation's name: the record's biz type. */
  bizType: string;
  /**
   * The operation for this request under its key: its validated request, its writes and its refusals. A request
   * that does not validate throws `requestInvalid(detail)`: a 400 problem, and nothing runs.
   */
  operation: (
    req: Req,
    key: string,
  ) =>
    | Omit<IdempotentOperation<T, Tx>, "scope" | "bizType" | "key">
    | Promise<Omit<IdempotentOperation<T, Tx>, "scope" | "bizType" | "key">>;
  /** Whose key this request's is (the authenticated caller). */
  scope: (req: Req) => string;
  /**
   * All that decides the operation's request besides the caller and the key, as text (the body as sent, or as
   * the framework parsed it, stringified; with the path's parameters too if the operation reads them). Given,
   * and with a replay cache, a copy whose text this instance answered before is replayed as that answer's
   * text, without `operation` (no validation, no hashing). Absent: every copy runs `operation`.
   */
  requestText?: (req: Req) => string | undefined | Promise<string | undefined>;
  /** The status of a success (default 200; 201 for a creation). */
  status?: number;
  /** The status of a declared refusal, by its code (default 422). */
  refusalStatus?: (code: string) => number | undefined;
  /**
   * A problem's `type` URI for a code, with a page that says what it means (then `title` names the problem).
   * Default `about:blank`: the title is the status's phrase, and the code is in a `code` member.
   */
  problemType?: (code: string) => string;
}

/** The core's own refusals and the binding's: their HTTP status and problem title. */
const CORE_REFUSALS: Record<string, { status: number; title: string }> = {
  REQUEST_INVALID: { status: 400, title: "Request invalid" },
  IDEMPOTENCY_KEY_MISSING: { status: 400, title: "Idempotency-Key required" },
  IDEMPOTENCY_KEY_INVALID: { status: 400, title: "Idempotency-Key malformed" },
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: "Idempotency-Key reused with another request" },
  REQUEST_IN_PROGRESS: { status: 409, title: "A request with this Idempotency-Key is still being processed" },
  IDEMPOTENCY_LEASE_LOST: { status: 409, title: "Another request took this Idempotency-Key over" },
  SERVICE_UNAVAILABLE: { status: 503, title: "Service unavailable" },
};

/**
 * Runs the route's operation for one request, once per key, and says what to answer: the result (a replay
 * with `Idempotent-Replayed: true`), or a refusal as problem details. An error that is not a refusal (the
 * operation's own, undeclared) is thrown, for the framework's error handling; its key is freed.
 */
export async function answerIdempotently<T, Tx, Req>(
  store: RecordStore<Tx>,
  config: IdempotencyConfig | undefined,
  route: IdempotentRoute<T, Tx, Req>,
  req: Req,
  call: HttpCall,
): Promise<HttpAnswer> {
  const field = keyOfField(call.keyField);
  if ("refused" in field) return problemAnswer(route, field.refused, field.detail, {});
  const ref = { scope: call.scope, bizType: route.bizType, key: field.key };
  const text = config?.cache && route.requestText ? await route.requestText(req) : undefined;
  try {
    const served = await serveIdempotent(
      store,
      {
        ...ref,
        ...(text !== undefined ? { text } : {}),
        operation: async () => ({ ...(await route.operation(req, field.key)), ...ref }),
        render: (answer) => {
          const body = JSON.stringify(answer.result) ?? "null";
          return { rendering: body, chars: body.length };
        },
      },
      config,
    );
    return resultAnswer(route, served.rendering, served.replayed);
  } catch (error) {
    if (!(error instanceof IdempotencyError)) throw error;
    const headers: Record<string, string> = {};
    if (error.details.replayed) headers[REPLAYED_FIELD] = "true";
    if (error.details.retryAfterMs !== undefined)
      headers["retry-after"] = String(Math.max(1, Math.ceil(error.details.retryAfterMs / 1000)));
    return problemAnswer(route, error.code, error.message, headers, error.details.meta);
  }
}

function resultAnswer<T, Tx, Req>(
  route: IdempotentRoute<T, Tx, Req>,
  text: string,
  replayed: boolean,
): HttpAnswer {
  return {
    status: route.status ?? 200,
    headers: replayed
      ? { "content-type": "application/json", [REPLAYED_FIELD]: "true" }
      : { "content-type": "application/json" },
    body: text,
  };
}

function problemAnswer<T, Tx, Req>(
  route: IdempotentRoute<T, Tx, Req>,
  code: string,
  detail: string,
  headers: Record<string, string>,
  meta?: Record<string, unknown>,
): HttpAnswer {
  const own = CORE_REFUSALS[code];
  const status = own?.status ?? route.refusalStatus?.(code) ?? 422;
  const type = route.problemType?.(code);
  return {
    status,
    headers: { ...headers, "content-type": "application/problem+json" },
    body: JSON.stringify({
      type: type ?? "about:blank",
      title: type ? (own?.title ?? code) : (STATUS_CODES[status] ?? code),
      status,
      detail,
      code,
      ...(meta ? { meta } : {}),
    }),
  };
}
