import { createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import { LRUCache } from "lru-cache";

export const SESSION_COOKIE = "checkout_session";
export const SESSION_MAX_AGE_SECONDS = 60 * 60 * 24 * 365;

const GUEST_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function newGuestId(): string {
  return randomUUID();
}

function mac(userId: string, secret: string, purpose = "session"): string {
  return createHmac("sha256", secret).update(`${purpose}:${userId}`).digest("base64url");
}

/** A session has been used this long since it was issued: the next use gets it issued anew (rotation). */
export const SESSION_ROTATE_AFTER_MS = 24 * 60 * 60 * 1000;

/**
 * Cookie value `<guest id>.<issued at, ms>.<HMAC>`: the shopper cannot choose whose orders they see, and a
 * revocation (api_token_revocation, for tokens and cookies alike) ends every session issued before it.
 */
export function signSession(userId: string, secret: string, issuedMs = Date.now()): string {
  return `${userId}.${issuedMs}.${mac(`${userId}.${issuedMs}`, secret)}`;
}

export interface SessionClaims {
  userId: string;
  /** 0 for a cookie made before sessions carried their issue time: any revocation ends it. */
  issuedMs: number;
}

/** The guest id and issue time, or null for a missing, malformed or forged cookie. */
export function verifySession(
  value: string | undefined | null,
  secret: AcceptedSecrets,
): SessionClaims | null {
  if (!value || value.length > 200) return null;
  const parts = value.split(".");
  const [userId, second, third] = parts;
  if (!userId || !second || !GUEST_ID.test(userId)) return null;
  // `<guest id>.<HMAC>`, as cookies were made before: still good, issued "at 0".
  if (parts.length === 2)
    return genuine("session", secret, value, second, userId) ? { userId, issuedMs: 0 } : null;
  if (parts.length !== 3 || !third || !/^\d{1,15}$/.test(second)) return null;
  return genuine("session", secret, value, third, `${userId}.${second}`)
    ? { userId, issuedMs: Number(second) }
    : null;
}

/**
 * Credentials this process found genuine, per purpose and secret: a shopper's client sends the same cookie or
 * token on every request, and its signature (an HMAC) is checked once rather than each time. Only genuine
 * ones are kept; expiry and revocation are decided on every use, cached or not.
 */
const GENUINE = {
  session: new Map<string, LRUCache<string, true>>(),
  "api-token": new Map<string, LRUCache<string, true>>(),
};

/**
 * The secret credentials are checked against: one, or several during a rotation (the one that signs now, then
 * those still accepted: SESSION_SECRET_PREVIOUS).
 */
export type AcceptedSecrets = string | readonly string[];

/** Whether `signature` is the MAC of `signedText` under one of `secrets` for `purpose` (remembered per whole credential). */
function genuine(
  purpose: keyof typeof GENUINE,
  secrets: AcceptedSecrets,
  credential: string,
  signature: string,
  signedText: string,
): boolean {
  for (const secret of typeof secrets === "string" ? [secrets] : secrets) {
    let known = GENUINE[purpose].get(secret);
    if (!known) {
      known = new LRUCache<string, true>({ max: 10_000 });
      GENUINE[purpose].set(secret, known);
    }
    if (known.has(credential)) return true;
    if (same(signature, mac(signedText, secret, purpose))) {
      known.set(credential, true);
      return true;
    }
  }
  return false;
}

function same(given: string, expected: string): boolean {
  const left = Buffer.from(given);
  const right = Buffer.from(expected);
  return left.length === right.length && timingSafeEqual(left, right);
}

export function sessionCookieHeader(value: string, secure: boolean): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Lax",
    `Max-Age=${SESSION_MAX_AGE_SECONDS}`,
    ...(secure ? ["Secure"] : []),
  ].join("; ");
}

const API_TOKEN_PREFIX = "ck_";

/** How long an API token is valid by default (API_TOKEN_TTL_HOURS). */
export const DEFAULT_API_TOKEN_TTL_S = 24 * 60 * 60;

/**
 * The shopper's bearer token for the REST API: `ck_<guest id>.<issued at, ms>.<HMAC>`, a
 * different MAC from the cookie's. It expires `ttlS` after it was issued, and every token a
 * shopper holds can be revoked at once (api_token_revocation, checked by the REST layer).
 */
export function signApiToken(userId: string, secret: string, issuedMs = Date.now()): string {
  return `${API_TOKEN_PREFIX}${userId}.${issuedMs}.${mac(`${userId}.${issuedMs}`, secret, "api-token")}`;
}

export interface ApiTokenClaims {
  userId: string;
  issuedMs: number;
  expiresMs: number;
}

/** The token's shopper and times, or null for a malformed, forged or expired token. */
export function verifyApiToken(
  token: string | undefined | null,
  secret: AcceptedSecrets,
  ttlS = DEFAULT_API_TOKEN_TTL_S,
  nowMs = Date.now(),
): ApiTokenClaims | null {
  if (!token?.startsWith(API_TOKEN_PREFIX)) return null;
  const [userId, issued, given, ...rest] = token.slice(API_TOKEN_PREFIX.length).split(".");
  if (!userId || !issued || !given || rest.length > 0) return null;
  if (!GUEST_ID.test(userId) || !/^\d{1,15}$/.test(issued)) return null;
  if (!genuine("api-token", secret, token, given, `${userId}.${issued}`)) return null;
  const issuedMs = Number(issued);
  const expiresMs = issuedMs + ttlS * 1000;
  return expiresMs > nowMs ? { userId, issuedMs, expiresMs } : null;
}

/** Reads one cookie from a Cookie header without pulling in a parser for one value. */
export { readCookie } from "~/shared/cookies";
