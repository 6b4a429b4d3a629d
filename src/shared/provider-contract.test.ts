import { describe, expect, it } from "vitest";
import { signBody, signPayRequest, verifyBodySignature, verifyPayRequest } from "~/shared/provider-contract";

const secret = "whsec_test_secret";
const body = '{"id":"evt_1","amount_cents":100}';

describe("notification signature", () => {
  it("accepts its own signature within the tolerance", () => {
    expect(verifyBodySignature(secret, body, signBody(secret, body, 1000), 1100, 300)).toBe("OK");
  });

  it("rejects a changed body, another secret, stale or future timestamps and garbage", () => {
    const header = signBody(secret, body, 1000);
    expect(verifyBodySignature(secret, `${body} `, header, 1000, 300)).toBe("BAD_SIGNATURE");
    expect(verifyBodySignature("other", body, header, 1000, 300)).toBe("BAD_SIGNATURE");
    expect(verifyBodySignature(secret, body, header, 1301, 300)).toBe("STALE_TIMESTAMP");
    expect(verifyBodySignature(secret, body, header, 699, 300)).toBe("STALE_TIMESTAMP");
    expect(verifyBodySignature(secret, body, "t=1000", 1000, 300)).toBe("MALFORMED");
    expect(verifyBodySignature(secret, body, "v1=zz,t=abc", 1000, 300)).toBe("MALFORMED");
    expect(verifyBodySignature(secret, body, null, 1000, 300)).toBe("MALFORMED");
  });
});

describe("pay request signature", () => {
  const params = {
    app_id: "app",
    out_trade_no: "P1",
    amount_cents: 2500,
    currency: "USD",
    notify_url: "http://127.0.0.1:3000/api/payments/notify",
    return_url: "/orders/1",
    t: 1,
    expires_at: 901,
  };
  it("detects a later expiry (a link cannot be stretched)", () => {
    const sig = signPayRequest(secret, params);
    expect(verifyPayRequest(secret, { ...params, expires_at: 99_999 }, sig)).toBe(false);
  });
  it("detects a changed amount", () => {
    const sig = signPayRequest(secret, params);
    expect(verifyPayRequest(secret, params, sig)).toBe(true);
    expect(verifyPayRequest(secret, { ...params, amount_cents: 1 }, sig)).toBe(false);
  });
});
