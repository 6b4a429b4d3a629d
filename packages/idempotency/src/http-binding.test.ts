import { describe, expect, it } from "vitest";
import { keyOfField } from "./http-binding";

describe("the key of an Idempotency-Key field", () => {
  it("reads an sf-string, with its escapes, or a bare token", () => {
    expect(keyOfField('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toEqual({
      key: "8e03978e-40d5-43e8-bc93-6894a57f9324",
    });
    expect(keyOfField(' "a \\"quoted\\" \\\\ key" ')).toEqual({ key: 'a "quoted" \\ key' });
    expect(keyOfField("plain-token_1")).toEqual({ key: "plain-token_1" });
    expect(keyOfField(["one"])).toEqual({ key: "one" });
  });

  it("refuses no field, two fields, a list, a broken sf-string and a key of no or too many characters", () => {
    expect(keyOfField(undefined)).toMatchObject({ refused: "IDEMPOTENCY_KEY_MISSING" });
    expect(keyOfField(null)).toMatchObject({ refused: "IDEMPOTENCY_KEY_MISSING" });
    for (const value of [
      ["a", "b"],
      "a, b",
      '"a", "b"',
      '"unterminated',
      '"bad \\n escape"',
      '"tab\tinside"',
      '"trailing" x',
      "two words",
      '""',
      "",
      "x".repeat(256),
      "é",
    ]) {
      expect(keyOfField(value), JSON.stringify(value)).toMatchObject({ refused: "IDEMPOTENCY_KEY_INVALID" });
    }
    expect(keyOfField("x".repeat(255))).toEqual({ key: "x".repeat(255) });
  });
});
