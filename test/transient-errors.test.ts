import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, createDb } from "~/server/db/client";
import { errorResponse } from "~/server/rest/protocol";
import { SESSION_COOKIE, signSession } from "~/server/session/session";
import { handleTrpcRequest } from "~/server/trpc/handler";
import { testAppContext } from "./support/app-context";

/**
 * A database that is away (connection refused, dropped, timed out) is a
 * retryable 503 wherever the query was — never a 500 — over tRPC and REST.
 */
const down = createDb("postgres://postgres:password@127.0.0.1:1/nowhere", { max: 1 });
afterAll(() => closeDb(down));

describe("a database that is away", () => {
  it("answers tRPC queries outside the idempotency core with 503 SERVICE_UNAVAILABLE", async () => {
    const app = testAppContext(down);
    for (const path of ["catalog.list", "orders.list"]) {
      const response = await handleTrpcRequest(app, new Request(`http://test/api/trpc/${path}`));
      const body = (await response.json()) as { error: { json: { data: { domainCode: string } } } };
      expect(response.status).toBe(503);
      expect(body.error.json.data.domainCode).toBe("SERVICE_UNAVAILABLE");
    }
  });

  it("answers a shopper with a session 503 too: whether the cookie was revoked is the database's to say", async () => {
    const app = testAppContext(down);
    const cookie = `${SESSION_COOKIE}=${signSession(randomUUID(), app.sessionSecret)}`;
    const response = await handleTrpcRequest(
      app,
      new Request("http://test/api/trpc/orders.list", { headers: { cookie } }),
    );
    expect(response.status).toBe(503);
  });

  it("maps a dropped connection to a REST 503 problem, and anything else to a 500", async () => {
    const logged: unknown[] = [];
    const dropped = Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" });
    const answer = errorResponse(dropped, (e) => logged.push(e));
    expect(answer.status).toBe(503);
    expect((JSON.parse(answer.body) as { code: string }).code).toBe("SERVICE_UNAVAILABLE");
    expect(errorResponse(new Error(`bug ${randomUUID()}`), (e) => logged.push(e)).status).toBe(500);
    expect(logged).toHaveLength(1);
  });
});
