import { describe, expect, it } from "vitest";
import { getEnv } from "~/env";
import { adminAction } from "./actions";

describe("adminAction", () => {
  it("answers a dropped database connection with a message to try again, not a 500", async () => {
    const req = new Request("http://x/api/admin/refunds/r/retry", {
      method: "POST",
      headers: { authorization: `Bearer ${getEnv().ADMIN_TOKEN}` },
    });
    const answer = await adminAction(req, getEnv().ADMIN_TOKEN, async () => {
      throw Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" });
    });
    expect(answer.status).toBe(303);
    expect(decodeURIComponent(answer.headers.get("location") ?? "")).toMatch(
      /^\/admin\?message=SERVICE_UNAVAILABLE: /,
    );
  });
});
