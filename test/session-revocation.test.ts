import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import { deleteTokens, postToken } from "~/server/rest/handlers";
import type { RestDeps } from "~/server/rest/protocol";
import { SESSION_COOKIE, SESSION_ROTATE_AFTER_MS, signSession } from "~/server/session/session";
import { handleTrpcRequest } from "~/server/trpc/handler";
import { fromWebRequest } from "~/shared/plain-http";
import { describe, expect, test } from "./support/fixtures";

/**
 * Sessions that can be revoked (issue 29): a copy of the shopper's cookie, taken before they signed out
 * everywhere else, reads nothing of theirs and mints no token for them afterwards; the browser that signed
 * out stays the same shopper; a bearer token can sign its shopper out over REST.
 */

/** A tRPC call over HTTP as a browser makes it, with a session cookie; the answer and any cookie set. */
async function call(app: AppContext, cookie: string | undefined, path: string, input?: unknown) {
  const mutation = path.startsWith("session.") || path === "orders.create";
  const url = new URL(`http://127.0.0.1/api/trpc/${path}`);
  if (!mutation && input !== undefined) url.searchParams.set("input", JSON.stringify({ json: input }));
  const response = await handleTrpcRequest(
    app,
    new Request(url, {
      method: mutation ? "POST" : "GET",
      headers: {
        "content-type": "application/json",
        ...(cookie ? { cookie: `${SESSION_COOKIE}=${cookie}` } : {}),
      },
      ...(mutation ? { body: JSON.stringify({ json: input ?? null }) } : {}),
    }),
  );
  const set = response.headers.get("set-cookie")?.match(new RegExp(`${SESSION_COOKIE}=([^;]+)`))?.[1];
  const body = (await response.json()) as { result?: { data: { json: unknown } }; error?: unknown };
  return { status: response.status, data: body.result?.data.json, cookie: set };
}

const mug = [{ skuId: "SKU-MUG", quantity: 1 }];

describe("signing out everywhere else", () => {
  test("a copy of the cookie taken before reads nothing of the shopper's and mints no token; the browser goes on", async ({
    app,
  }) => {
    const first = await call(app, undefined, "orders.create", { requestId: randomUUID(), items: mug });
    expect(first.status).toBe(200);
    const cookie = first.cookie ?? "";
    const stolen = cookie;
    const { orderId } = first.data as { orderId: string };
    expect((await call(app, stolen, "orders.list")).data).toHaveLength(1);

    const signedOut = await call(app, cookie, "session.revokeAll");
    expect(signedOut.status).toBe(200);
    // This browser is handed a fresh cookie for the same shopper, and still sees its order.
    expect(signedOut.cookie).toBeDefined();
    expect(signedOut.cookie).not.toBe(cookie);
    const mine = await call(app, signedOut.cookie, "orders.list");
    expect((mine.data as { orderId: string }[]).map((o) => o.orderId)).toEqual([orderId]);

    // The copy is a stranger now: a new guest with nothing, and a token it mints is that guest's.
    const thief = await call(app, stolen, "orders.list");
    expect(thief.data).toEqual([]);
    expect(thief.cookie).toBeDefined();
    expect((await call(app, stolen, "orders.get", { orderId })).status).toBe(404);
    const minted = await call(app, stolen, "session.issueApiToken");
    const token = (minted.data as { token: string }).token;
    expect(token.split(".")[0]).not.toBe(`ck_${cookie.split(".")[0]}`);
  });

  test("an old session is issued anew on use; a cookie from before issue times still works until revoked", async ({
    app,
  }) => {
    const userId = randomUUID();
    const old = signSession(userId, app.sessionSecret, Date.now() - SESSION_ROTATE_AFTER_MS - 60_000);
    const used = await call(app, old, "orders.list");
    expect(used.data).toEqual([]);
    expect(used.cookie?.startsWith(`${userId}.`)).toBe(true);
    expect(used.cookie).not.toBe(old);
    // `<guest id>.<HMAC>`, as cookies were made before: the same shopper, rotated at once.
    const { createHmac } = await import("node:crypto");
    const legacy = `${userId}.${createHmac("sha256", app.sessionSecret).update(`session:${userId}`).digest("base64url")}`;
    const kept = await call(app, legacy, "orders.list");
    expect(kept.cookie?.startsWith(`${userId}.`)).toBe(true);
  });

  test("DELETE /api/v1/tokens signs the bearer's shopper out: that token and the others are refused", async ({
    app,
  }) => {
    const deps: RestDeps = { app, tokensEnabled: true, logError: () => {} };
    const token = (
      JSON.parse(
        (
          await postToken(
            deps,
            fromWebRequest(new Request("http://127.0.0.1/api/v1/tokens", { method: "POST" })),
          )
        ).body,
      ) as { token: string }
    ).token;
    const withToken = (bearer: string | undefined) =>
      new Request("http://127.0.0.1/api/v1/tokens", {
        method: "DELETE",
        headers: bearer ? { authorization: `Bearer ${bearer}` } : {},
      });
    expect((await deleteTokens(deps, fromWebRequest(withToken(undefined)))).status).toBe(401);
    const revoked = await deleteTokens(deps, fromWebRequest(withToken(token)));
    expect(revoked.status).toBe(200);
    expect(JSON.parse(revoked.body)).toMatchObject({ revokedAt: expect.any(String) });
    // The token is refused from now on, for this and for every other call.
    expect((await deleteTokens(deps, fromWebRequest(withToken(token)))).status).toBe(401);
  });
});
