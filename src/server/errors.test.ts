import { describe, expect, it, vi } from "vitest";

describe("DomainError across two copies of its module", () => {
  it("is recognised by a copy that did not make it (the production process loads two: src/host/server.ts)", async () => {
    const first = await import("~/server/errors");
    vi.resetModules();
    const second = await import("~/server/errors");
    expect(second.DomainError).not.toBe(first.DomainError);
    const error = new first.DomainError("OUT_OF_STOCK", "sold out");
    expect(error instanceof second.DomainError).toBe(true);
    expect(second.isDomainError(error, "OUT_OF_STOCK")).toBe(true);
    expect(second.isDomainError(new Error("plain"))).toBe(false);
  });
});
