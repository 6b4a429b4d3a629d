import { timingSafeEqual } from "node:crypto";
import { readCookie } from "./cookies";

export const ADMIN_COOKIE = "admin_token";

function same(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** An operator: the admin token as a Bearer header or in the admin cookie. */
export function isAdminRequest(headers: Headers, token: string): boolean {
  const bearer = headers.get("authorization")?.match(/^Bearer\s+(.+)$/i)?.[1];
  const cookie = readCookie(headers.get("cookie"), ADMIN_COOKIE);
  return [bearer, cookie].some((given) => given !== undefined && same(given, token));
}

export function adminCookieHeader(token: string): string {
  return `${ADMIN_COOKIE}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=86400`;
}

export const ADMIN_UNAUTHORIZED_HTML = `<!doctype html><title>Admin token required</title>
<p>These pages are for operators. Open them once with <code>?token=&lt;ADMIN_TOKEN&gt;</code>
(the token is printed when the app starts) or send <code>Authorization: Bearer &lt;ADMIN_TOKEN&gt;</code>.</p>`;
