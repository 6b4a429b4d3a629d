import { describe, expect, it } from "vitest";
import { moneyInWords } from "./money";

const usd = { currency: "USD", paidCents: 0, backCents: 0, onItsWayCents: 0, keptCents: 0 };

describe("where the shopper's money is, in words", () => {
  it("says each place the money is, and nothing about places it is not", () => {
    expect(moneyInWords(usd)).toBe("Nothing paid.");
    expect(moneyInWords({ ...usd, paidCents: 4500, keptCents: 4500 })).toBe("Paid $45.00.");
    expect(moneyInWords({ ...usd, paidCents: 4500, onItsWayCents: 4500 })).toBe(
      "Paid $45.00; $45.00 on its way back to you.",
    );
    expect(moneyInWords({ ...usd, paidCents: 4500, backCents: 4500 })).toBe(
      "Paid $45.00; all of it back with you.",
    );
    expect(
      moneyInWords({ ...usd, paidCents: 4500, backCents: 1000, onItsWayCents: 500, keptCents: 3000 }),
    ).toBe("Paid $45.00; $10.00 back with you; $5.00 on its way back to you; $30.00 kept for the order.");
  });
});
