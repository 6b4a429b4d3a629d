import { describe, expect, it } from "vitest";
import {
  MESSAGE_KINDS,
  type MessageKind,
  signBody,
  signPayRequest,
  signQuery,
  verifyBodySignature,
  verifyPayRequest,
  verifyQuery,
} from "~/shared/provider-contract";

const secret = "whsec_test_secret";
const body = '{"id":"evt_1","amount_cents":100}';

describe("notification signature", () => {
  it("accepts its own signature within the tolerance", () => {
    expect(
      verifyBodySignature(
        "notification",
        secret,
        body,
        signBody("notification", secret, body, 1000),
        1100,
        300,
      ),
    ).toBe("OK");
  });

  it("rejects a changed body, another secret, stale or future timestamps and garbage", () => {
    const header = signBody("notification", secret, body, 1000);
    expect(verifyBodySignature("notification", secret, `${body} `, header, 1000, 300)).toBe("BAD_SIGNATURE");
    expect(verifyBodySignature("notification", "other", body, header, 1000, 300)).toBe("BAD_SIGNATURE");
    expect(verifyBodySignature("notification", secret, body, header, 1301, 300)).toBe("STALE_TIMESTAMP");
    expect(verifyBodySignature("notification", secret, body, header, 699, 300)).toBe("STALE_TIMESTAMP");
    expect(verifyBodySignature("notification", secret, body, "t=1000", 1000, 300)).toBe("MALFORMED");
    expect(verifyBodySignature("notification", secret, body, "v1=zz,t=abc", 1000, 300)).toBe("MALFORMED");
    expect(verifyBodySignature("notification", secret, body, null, 1000, 300)).toBe("MALFORMED");
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

describe("message kinds", () => {
  const kinds = Object.keys(MESSAGE_KINDS) as MessageKind[];
  // A MockPay-signed refund.succeeded notification also parses as a refund request (zod strips what it does
  // not know): signed as one kind, it must be refused as every other.
  const refundNotification = JSON.stringify({
    id: "evt_1",
    type: "refund.succeeded",
    app_id: "app",
    out_trade_no: "P1",
    transaction_id: "T1",
    refund_no: "R1",
    amount_cents: 100,
    currency: "USD",
    created_at: "2026-12-05T00:00:00Z",
  });
  it.each(kinds.flatMap((signed) => kinds.filter((as) => as !== signed).map((as) => [signed, as] as const)))(
    "a message signed as %s is refused as %s",
    (signed, as) => {
      const header = signBody(signed, secret, refundNotification, 1000);
      expect(verifyBodySignature(signed, secret, refundNotification, header, 1000, 300)).toBe("OK");
      expect(verifyBodySignature(as, secret, refundNotification, header, 1000, 300)).toBe("BAD_SIGNATURE");
    },
  );
  it("a status query's signature is good for the query only, and names its path", () => {
    const path = "/provider/api/trades/P1?app_id=app";
    const header = signQuery(secret, path, 1000);
    expect(verifyQuery(secret, path, header, 1000, 300)).toBe("OK");
    expect(verifyQuery(secret, "/provider/api/trades/P2?app_id=app", header, 1000, 300)).toBe(
      "BAD_SIGNATURE",
    );
    expect(verifyBodySignature("statusAnswer", secret, `GET ${path}`, header, 1000, 300)).toBe(
      "BAD_SIGNATURE",
    );
  });
});
