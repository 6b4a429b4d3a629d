import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { readCookie } from "./cookies";
import type { HeaderReader } from "./plain-http";

export const ADMIN_COOKIE = "admin_token";

/** Constant time, whatever either holds: digests of equal length are compared, so not even the length shows. */
function same(a: string, b: string): boolean {
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(a), digest(b));
}

/** The admin token as given (a `?token=` on an operator page), compared in constant time. */
export function isAdminToken(given: string, token: string): boolean {
  return same(given, token);
}

/** How long an operator's admin session (the cookie `?token=` sets) lasts. */
export const ADMIN_SESSION_S = 8 * 60 * 60;

/** The session's signing key, derived from the token: a new ADMIN_TOKEN ends every session. */
const sessionKey = (token: string) => createHash("sha256").update(`admin-session:${token}`).digest();

/** A signed admin session that ends at `expiresS` (seconds since the epoch); never the token itself. */
export function signAdminSession(token: string, expiresS: number): string {
  const mac = createHmac("sha256", sessionKey(token)).update(`admin:${expiresS}`).digest("base64url");
  return `${expiresS}.${mac}`;
}

function validAdminSession(value: string, token: string, nowS: number): boolean {
  const [expires, mac] = value.split(".");
  if (!expires || !mac || !/^\d+$/.test(expires) || Number(expires) <= nowS) return false;
  return same(signAdminSession(token, Number(expires)), value);
}

/** An operator: the admin token as a Bearer header, or an unexpired admin session in the admin cookie. */
export function isAdminRequest(
  headers: HeaderReader,
  token: string,
  nowS = Math.floor(Date.now() / 1000),
): boolean {
  const bearer = headers.get("authorization")?.match(/^Bearer\s+(.+)$/i)?.[1];
  if (bearer !== undefined && same(bearer, token)) return true;
  const cookie = readCookie(headers.get("cookie"), ADMIN_COOKIE);
  return cookie !== undefined && validAdminSession(cookie, token, nowS);
}

export function adminCookieHeader(
  token: string,
  secure: boolean,
  nowS = Math.floor(Date.now() / 1000),
): string {
  const session = signAdminSession(token, nowS + ADMIN_SESSION_S);
  return `${ADMIN_COOKIE}=${session}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${ADMIN_SESSION_S}${secure ? "; Secure" : ""}`;
}

export const ADMIN_UNAUTHORIZED_HTML = `<!doctype html><title>Admin token required</title>
<p>These pages are for operators. Open them once with <code>?token=&lt;ADMIN_TOKEN&gt;</code>
(the token is printed when the app starts) or send <code>Authorization: Bearer &lt;ADMIN_TOKEN&gt;</code>.</p>`;
