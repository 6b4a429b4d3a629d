import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import type { AppContext } from "~/server/app-context";
import { handleTrpcRequest } from "~/server/trpc/handler";
import { router, shopperProcedure } from "~/server/trpc/init";
import { getLogger } from "~/shared/logger";

/**
 * Every 500 leaves one log line: an unknown error inside a procedure is logged by
 * the procedure middleware, one raised around it (here: building the response) by
 * the HTTP handler — once each, never twice, never not at all.
 */
const testRouter = router({
  fails: shopperProcedure.query(() => {
    throw new Error("boom inside");
  }),
  unserialisable: shopperProcedure.query(() => ({
    get value(): string {
      throw new Error("boom while answering");
    },
  })),
});
// Only what the tRPC context reads.
const app = {
  sessionSecret: "s".repeat(32),
  gateway: { admitClient: async () => {} },
} as unknown as AppContext;
const call = (path: string) =>
  handleTrpcRequest(app, new Request(`http://127.0.0.1/api/test/${path}`), {
    router: testRouter,
    endpoint: "/api/test",
  });

afterEach(() => vi.restoreAllMocks());

describe("internal errors of tRPC calls", () => {
  it("are answered 500 without their message and logged once, inside a procedure or around it", async () => {
    const error = vi.spyOn(getLogger(), "error").mockImplementation(() => undefined);
    for (const [path, logLine, message] of [
      ["fails", "unhandled error in procedure", "boom inside"],
      ["unserialisable", "unhandled error around a procedure", "boom while answering"],
    ] as const) {
      error.mockClear();
      const response = await call(path);
      expect(response.status).toBe(500);
      const body = await response.text();
      expect(body).toContain("Internal server error");
      expect(body).not.toContain(message);
      expect(error).toHaveBeenCalledTimes(1);
      expect(error.mock.calls[0]?.[1]).toBe(logLine);
      expect(String((error.mock.calls[0]?.[0] as { err?: unknown })?.err)).toContain(message);
    }
  });
});

describe("malformed input", () => {
  const inputRouter = router({
    place: shopperProcedure
      .input(z.object({ requestId: z.string().min(8), items: z.array(z.number()).min(1) }))
      .mutation(() => "placed"),
  });
  const send = async (input: unknown) => {
    const response = await handleTrpcRequest(
      app,
      new Request("http://127.0.0.1/api/test/place", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ json: input }),
      }),
      { router: inputRouter, endpoint: "/api/test" },
    );
    const body = (await response.json()) as { error: { json: { data: Record<string, unknown> } } };
    return { status: response.status, data: body.error.json.data };
  };

  it("says why in the data, by field or about the whole input, never an empty fieldErrors", async () => {
    const whole = await send("not an object");
    expect(whole.status).toBe(400);
    expect(whole.data.fieldErrors).toBeNull();
    expect(whole.data.formErrors).toEqual([expect.stringMatching(/expected object/)]);

    const fields = await send({ requestId: "short", items: [] });
    expect(fields.status).toBe(400);
    expect(fields.data.formErrors).toBeNull();
    expect(Object.keys(fields.data.fieldErrors as object).sort()).toEqual(["items", "requestId"]);
  });
});
