import { describe, expect, it } from "vitest";
import {
  ADMIN_SESSION_S,
  adminCookieHeader,
  isAdminRequest,
  isAdminToken,
  signAdminSession,
} from "./admin-auth";

const token = "an-admin-token-0123456789abcdefghijklmn";
const now = 1_800_000_000;
const withCookie = (value: string) => new Headers({ cookie: `admin_token=${value}` });

describe("the admin session cookie", () => {
  it("holds a signed, expiring session, never the token", () => {
    const header = adminCookieHeader(token, false, now);
    expect(header).not.toContain(token);
    expect(header).toMatch(new RegExp(`Max-Age=${ADMIN_SESSION_S}`));
    expect(adminCookieHeader(token, true, now)).toMatch(/; Secure$/);
    const value = /admin_token=([^;]+)/.exec(header)?.[1] ?? "";
    expect(isAdminRequest(withCookie(value), token, now)).toBe(true);
    expect(isAdminRequest(withCookie(value), token, now + ADMIN_SESSION_S - 1)).toBe(true);
  });

  it("is refused once expired, when forged, after the token changed, or when it is the raw token", () => {
    const value = signAdminSession(token, now + 60);
    expect(isAdminRequest(withCookie(value), token, now + 60)).toBe(false);
    expect(isAdminRequest(withCookie(`${now + 9_999_999}.${value.split(".")[1]}`), token, now)).toBe(false);
    expect(isAdminRequest(withCookie(value), `${token}-rotated`, now)).toBe(false);
    // What the cookie held before: the token itself no longer opens the pages from a cookie.
    expect(isAdminRequest(withCookie(token), token, now)).toBe(false);
    expect(isAdminRequest(withCookie("garbage"), token, now)).toBe(false);
  });

  it("the token still works as a Bearer header", () => {
    expect(isAdminRequest(new Headers({ authorization: `Bearer ${token}` }), token, now)).toBe(true);
    expect(isAdminRequest(new Headers({ authorization: "Bearer nope" }), token, now)).toBe(false);
  });
});

describe("the admin ?token= on an operator page", () => {
  it("is compared whole, whatever its length (digests compared in constant time)", () => {
    expect(isAdminToken(token, token)).toBe(true);
    expect(isAdminToken(`${token}x`, token)).toBe(false);
    expect(isAdminToken(token.slice(0, -1), token)).toBe(false);
    expect(isAdminToken("", token)).toBe(false);
    expect(isAdminToken(token.toUpperCase(), token)).toBe(false);
  });
});
