import { describe, expect, it } from "vitest";
import { canonicalJson, fingerprint } from "./fingerprint";

describe("canonicalJson", () => {
  it("sorts keys at every depth and drops undefined members", () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: undefined } })).toBe(
      '{"a":{"d":[2,{"y":2,"z":1}]},"b":1}',
    );
  });

  it("normalises number formatting", () => {
    expect(canonicalJson({ n: 1.0 })).toBe(canonicalJson({ n: 1 }));
    expect(canonicalJson({ n: 1e2 })).toBe('{"n":100}');
    expect(canonicalJson(-0)).toBe("0");
  });

  it("refuses values that have no faithful JSON form", () => {
    expect(() => canonicalJson(Number.NaN)).toThrow(TypeError);
    expect(() => canonicalJson(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => canonicalJson(10n)).toThrow(TypeError);
  });
});

describe("fingerprint", () => {
  it("is the same for the same request in any key order", () => {
    expect(fingerprint("order.create", { a: 1, b: [1, 2] })).toBe(
      fingerprint("order.create", { b: [1, 2], a: 1 }),
    );
  });

  it("differs for a different payload or a different operation", () => {
    const base = fingerprint("order.create", { a: 1 });
    expect(fingerprint("order.create", { a: 2 })).not.toBe(base);
    expect(fingerprint("refund.create", { a: 1 })).not.toBe(base);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
  });
});
