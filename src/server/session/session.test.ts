import { describe, expect, it } from "vitest";
import { newGuestId, readCookie, signApiToken, signSession, verifyApiToken, verifySession } from "./session";

const secret = "a-test-secret-of-some-length";

describe("guest session cookie", () => {
  it("round-trips a signed guest id", () => {
    const id = newGuestId();
    expect(verifySession(signSession(id, secret), secret)).toBe(id);
  });

  it("rejects forged, re-targeted and malformed values", () => {
    const id = newGuestId();
    const other = newGuestId();
    const signed = signSession(id, secret);
    expect(verifySession(signed, "another-secret-entirely")).toBeNull();
    expect(verifySession(`${other}${signed.slice(id.length)}`, secret)).toBeNull();
    expect(verifySession(`${id}.`, secret)).toBeNull();
    expect(verifySession("not-a-session", secret)).toBeNull();
    expect(verifySession(undefined, secret)).toBeNull();
  });

  it("signs API tokens that are not interchangeable with the cookie", () => {
    const id = newGuestId();
    const token = signApiToken(id, secret);
    expect(verifyApiToken(token, secret)).toBe(id);
    expect(verifyApiToken(signSession(id, secret), secret)).toBeNull();
    expect(verifySession(token.slice(3), secret)).toBeNull();
    expect(verifyApiToken(`${token}x`, secret)).toBeNull();
  });

  it("reads one cookie out of a header", () => {
    expect(readCookie("a=1; checkout_session=xyz.abc; b=2", "checkout_session")).toBe("xyz.abc");
    expect(readCookie("a=1", "checkout_session")).toBeUndefined();
  });
});
