import { describe, expect, it } from "vitest";
import { newGuestId, readCookie, signApiToken, signSession, verifyApiToken, verifySession } from "./session";

const secret = "a-test-secret-of-some-length";

describe("guest session cookie", () => {
  it("round-trips a signed guest id and its issue time, which cannot be moved", () => {
    const id = newGuestId();
    const signed = signSession(id, secret, 1_700_000_000_000);
    expect(verifySession(signed, secret)).toEqual({ userId: id, issuedMs: 1_700_000_000_000 });
    // A copy made to look issued after a revocation is a forgery.
    expect(verifySession(signed.replace(".1700000000000.", ".1800000000000."), secret)).toBeNull();
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

  it("signs API tokens that are not interchangeable with the cookie, and that expire", () => {
    const id = newGuestId();
    const issuedMs = Date.now();
    const token = signApiToken(id, secret, issuedMs);
    expect(verifyApiToken(token, secret)).toEqual({ userId: id, issuedMs, expiresMs: issuedMs + 86_400_000 });
    expect(verifyApiToken(token, secret, 60, issuedMs + 59_999)?.userId).toBe(id);
    expect(verifyApiToken(token, secret, 60, issuedMs + 60_000)).toBeNull();
    // The issue time is signed: moving it forward forges nothing.
    expect(verifyApiToken(token.replace(`.${issuedMs}.`, `.${issuedMs + 1000}.`), secret)).toBeNull();
    expect(verifyApiToken(signSession(id, secret), secret)).toBeNull();
    expect(verifySession(token.slice(3), secret)).toBeNull();
    expect(verifyApiToken(`${token}x`, secret)).toBeNull();
  });

  it("reads one cookie out of a header", () => {
    expect(readCookie("a=1; checkout_session=xyz.abc; b=2", "checkout_session")).toBe("xyz.abc");
    expect(readCookie("a=1", "checkout_session")).toBeUndefined();
  });
});

describe("a rotation of the session secret", () => {
  it("accepts what either secret signed while both are accepted, and nothing else", () => {
    const old = "old-secret-old-secret-old-secret-1";
    const next = "new-secret-new-secret-new-secret-2";
    const userId = newGuestId();
    const byOld = signSession(userId, old);
    const byNext = signSession(userId, next);
    expect(verifySession(byOld, [next, old])?.userId).toBe(userId);
    expect(verifySession(byNext, [next, old])?.userId).toBe(userId);
    expect(verifySession(byOld, [next])).toBeNull();
    expect(verifySession(signSession(userId, "a-third-secret-a-third-secret-33"), [next, old])).toBeNull();
    const token = signApiToken(userId, old);
    expect(verifyApiToken(token, [next, old])?.userId).toBe(userId);
    expect(verifyApiToken(token, next)).toBeNull();
  });
});

describe("credentials found genuine are remembered, per secret", () => {
  it("a second check gives the same answer; another secret, a forgery or an expired token still fail", () => {
    const id = newGuestId();
    const cookie = signSession(id, secret, 1_700_000_000_000);
    const token = signApiToken(id, secret, 1_000);
    for (let i = 0; i < 2; i++) {
      expect(verifySession(cookie, secret)).toEqual({ userId: id, issuedMs: 1_700_000_000_000 });
      expect(verifySession(cookie, "another-secret-entirely")).toBeNull();
      expect(verifySession(`${cookie.slice(0, -2)}xx`, secret)).toBeNull();
      expect(verifyApiToken(token, secret, 86_400, 2_000)).toEqual({
        userId: id,
        issuedMs: 1_000,
        expiresMs: 86_401_000,
      });
      // Genuine, and remembered as such, but expired: refused.
      expect(verifyApiToken(token, secret, 86_400, 86_401_000)).toBeNull();
      expect(verifyApiToken(token, "another-secret-entirely", 86_400, 2_000)).toBeNull();
    }
  });
});
