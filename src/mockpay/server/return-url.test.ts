import { describe, expect, it } from "vitest";
import { sameSiteReturnPath } from "./return-url";

describe("the shopper's way back from MockPay", () => {
  it("keeps a path on this site, with its query", () => {
    expect(sameSiteReturnPath("/orders/123?from=pay#top")).toBe("/orders/123?from=pay#top");
  });
  it.each([
    "//evil.example/orders",
    "/\\evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "orders/123",
    "",
  ])("sends %j to the front page instead", (url) => {
    expect(sameSiteReturnPath(url)).toBe("/");
  });
});
