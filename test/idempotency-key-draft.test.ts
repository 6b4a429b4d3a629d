import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDb, type Db } from "~/server/db/client";
import { acquire, fingerprint } from "~/server/operations";
import { preferredWaitS } from "~/server/rest/rest-route";
import { type AppServer, startAppServer } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The REST API against draft-ietf-httpapi-idempotency-key-header (-09), section by section, over HTTP against
 * the built production server: each requirement of the draft a test, named by its section. Where this server
 * does more than the draft asks, the test says so.
 */
let t: TestDatabase;
let db: Db;
let server: AppServer;
const WAIT_MS = 1_500;

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 1 });
  db = createDb(t.url, { max: 2 });
  server = await startAppServer({ databaseUrl: t.url, env: { IDEMPOTENCY_WAIT_MS: String(WAIT_MS) } });
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await db?.$client.end();
  await t?.drop();
});

async function newToken(): Promise<string> {
  const response = await fetch(`${server.baseUrl}/api/v1/tokens`, { method: "POST" });
  return ((await response.json()) as { token: string }).token;
}

/** A key held by an original that has not finished (another instance working on it); a token is `ck_<shopper>.…`. */
async function held(token: string) {
  const userId = token.slice(3).split(".")[0] ?? "";
  const key = randomUUID();
  await acquire(
    db,
    { scope: userId, bizType: "order.create", key },
    fingerprint("order.create", { items: [{ skuId: "SKU-MUG", quantity: 1 }] }),
    { ttlMs: 60_000, leaseMs: 60_000, waitMs: WAIT_MS },
  );
  return key;
}

const mugs = (quantity = 1) => ({ items: [{ skuId: "SKU-MUG", quantity }] });

/** A POST with raw header lines (several fields of one name included), as a client would send it. */
function post(path: string, token: string, keys: string[], body: unknown, extra: [string, string][] = []) {
  return new Promise<{ status: number; headers: Record<string, string>; body: Record<string, unknown> }>(
    (resolve, reject) => {
      const payload = JSON.stringify(body);
      const url = new URL(path, server.baseUrl);
      const headers: [string, string][] = [
        ["host", url.host],
        ["authorization", `Bearer ${token}`],
        ["content-type", "application/json"],
        ["content-length", String(Buffer.byteLength(payload))],
        ...keys.map((key) => ["idempotency-key", key] as [string, string]),
        ...extra,
      ];
      const req = httpRequest(
        { host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: headers.flat() },
        (res) => {
          let text = "";
          res.on("data", (chunk) => (text += chunk));
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers as Record<string, string>,
              body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
            }),
          );
        },
      );
      req.on("error", reject);
      req.end(payload);
    },
  );
}

describe("§2.1 Syntax: Idempotency-Key = sf-string", () => {
  it("§2.1 accepts the key as a Structured Field string (quoted)", async () => {
    const answer = await post("/api/v1/orders", await newToken(), [`"${randomUUID()}"`], mugs());
    expect(answer.status).toBe(201);
  });

  it("§2.1 accepts the bare token too, as Stripe and older clients send it, and it is the same key", async () => {
    const token = await newToken();
    const key = randomUUID();
    const bare = await post("/api/v1/orders", token, [key], mugs());
    const quoted = await post("/api/v1/orders", token, [`"${key}"`], mugs());
    expect(bare.status).toBe(201);
    expect(quoted.headers["idempotent-replayed"]).toBe("true");
    expect(quoted.body).toEqual(bare.body);
  });

  it.each([
    ["an unterminated string", '"abc-1234-unterminated'],
    ["an escape inside the string", '"abc\\"1234-escaped"'],
    ["a key too short for the published syntax", '"short"'],
    ["characters outside the published syntax", '"has spaces in it"'],
  ])("§2.1 refuses a malformed key (%s) with 400 problem details, and writes nothing", async (_name, key) => {
    const answer = await post("/api/v1/orders", await newToken(), [key], mugs());
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/problem+json");
    expect(answer.body).toMatchObject({ code: "IDEMPOTENCY_KEY_INVALID", status: 400 });
  });

  it("§2.1 refuses a request with more than one Idempotency-Key field (clients MUST NOT send two)", async () => {
    const answer = await post(
      "/api/v1/orders",
      await newToken(),
      [`"${randomUUID()}"`, `"${randomUUID()}"`],
      mugs(),
    );
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: "IDEMPOTENCY_KEY_INVALID" });
  });
});

describe("§2.2 Uniqueness of Idempotency Key", () => {
  it("§2.2 a key reused with another payload is refused (see §2.7: 422)", async () => {
    const token = await newToken();
    const key = randomUUID();
    expect((await post("/api/v1/orders", token, [key], mugs(1))).status).toBe(201);
    const reused = await post("/api/v1/orders", token, [key], mugs(2));
    expect(reused.status).toBe(422);
    expect(reused.body).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
  });

  it("§2.2 the key's uniqueness is defined by the resource owner: each shopper's keys are its own", async () => {
    const key = randomUUID();
    const first = await post("/api/v1/orders", await newToken(), [key], mugs());
    const other = await post("/api/v1/orders", await newToken(), [key], mugs());
    expect([first.status, other.status]).toEqual([201, 201]);
    expect(other.headers["idempotent-replayed"]).toBeUndefined();
    expect(other.body.orderId).not.toBe(first.body.orderId);
  });
});

describe("§2.3 Idempotency Key Validity and Expiry; §2.5 the server MUST publish its policy", () => {
  it("§2.3 §2.5 publishes the policy, with the expiry, at a stable URL linked from the OpenAPI document", async () => {
    const policy = (await (await fetch(`${server.baseUrl}/api/v1/idempotency-policy`)).json()) as {
      expiresAfterSeconds: number;
      key: { pattern: string };
      fingerprint: string;
      operations: { path: string }[];
    };
    expect(policy.expiresAfterSeconds).toBe(24 * 3600);
    expect(policy.key.pattern).toBeTruthy();
    expect(policy.fingerprint).toBeTruthy();
    expect(policy.operations.map((op) => op.path)).toContain("/api/v1/orders");
    const openapi = await (await fetch(`${server.baseUrl}/api/v1/openapi.json`)).text();
    expect(openapi).toContain("/api/v1/idempotency-policy");
  });

  it("§2.3 every answer the key's record gave says when the key expires", async () => {
    const answer = await post("/api/v1/orders", await newToken(), [randomUUID()], mugs());
    const expires = Date.parse(answer.headers["idempotency-key-expires"] ?? "");
    expect(expires - Date.now()).toBeGreaterThan(23 * 3600 * 1000);
  });
});

describe("§2.4 Idempotency Fingerprint", () => {
  it("§2.4 the fingerprint is of the request's meaning: the same lines in another order are the same request", async () => {
    const token = await newToken();
    const key = randomUUID();
    const lines = [
      { skuId: "SKU-MUG", quantity: 1 },
      { skuId: "SKU-ESPRESSO", quantity: 1 },
    ];
    const first = await post("/api/v1/orders", token, [key], { items: lines });
    const again = await post("/api/v1/orders", token, [key], { items: [...lines].reverse() });
    expect(again.status).toBe(first.status);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.body).toEqual(first.body);
  });
});

describe("§2.6 Idempotency Enforcement Scenarios", () => {
  it("§2.6 a first request is processed normally", async () => {
    const answer = await post("/api/v1/orders", await newToken(), [randomUUID()], mugs());
    expect(answer.status).toBe(201);
    expect(answer.headers.location).toBe(`/api/v1/orders/${answer.body.orderId}`);
    expect(answer.headers["idempotent-replayed"]).toBeUndefined();
  });

  it("§2.6 a retry after completion is answered with the previous result, a success", async () => {
    const token = await newToken();
    const key = randomUUID();
    const first = await post("/api/v1/orders", token, [key], mugs());
    const retry = await post("/api/v1/orders", token, [key], mugs());
    expect(retry.status).toBe(201);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers.location).toBe(first.headers.location);
    expect(retry.headers["idempotent-replayed"]).toBe("true");
  });

  it("§2.6 a retry after completion is answered with the previous result, an error", async () => {
    const token = await newToken();
    const key = randomUUID();
    const tooMany = { items: [{ skuId: "SKU-LIMITED", quantity: 50 }] };
    const first = await post("/api/v1/orders", token, [key], tooMany);
    const retry = await post("/api/v1/orders", token, [key], tooMany);
    expect(first.status).toBe(412);
    expect(retry.status).toBe(412);
    expect(retry.body).toEqual(first.body);
    expect(retry.headers["idempotent-replayed"]).toBe("true");
  });

  it("§2.6 a request retried while the original is still processed gets a conflict (see §2.7: 409)", async () => {
    const token = await newToken();
    // The original: holding the key, not finished (another instance working on it).
    const key = await held(token);
    const retried = await post("/api/v1/orders", token, [key], mugs());
    // This server first waits up to IDEMPOTENCY_WAIT_MS for the original to finish (and then answers its
    // result, a §2.6 retry); an original that outlasts the wait is the draft's conflict.
    expect(retried.status).toBe(409);
    expect(retried.headers["content-type"]).toBe("application/problem+json");
    expect(retried.headers["retry-after"]).toBeTruthy();
    expect(retried.body).toMatchObject({ code: "REQUEST_IN_PROGRESS", status: 409 });
  });
});

describe("§2.6 with RFC 7240's Prefer: wait", () => {
  it("§2.6 a client that prefers not to wait gets the draft's conflict at once, the preference applied", async () => {
    const token = await newToken();
    const key = await held(token);
    const started = performance.now();
    const answer = await post("/api/v1/orders", token, [key], mugs(), [["prefer", "wait=0"]]);
    const tookMs = performance.now() - started;
    expect(answer.status).toBe(409);
    expect(answer.body).toMatchObject({ code: "REQUEST_IN_PROGRESS" });
    // Not the server's own wait for the original (IDEMPOTENCY_WAIT_MS): told at once.
    expect(tookMs).toBeLessThan(WAIT_MS);
  });

  it("§2.6 a first request under a stated wait says the preference was applied", async () => {
    const answer = await post("/api/v1/orders", await newToken(), [randomUUID()], mugs(), [
      ["prefer", "wait=3"],
    ]);
    expect(answer.status).toBe(201);
    expect(answer.headers["preference-applied"]).toBe("wait=3");
  });

  it.each([
    ["wait=0", 0],
    ["respond-async, wait=10", 10],
    ['wait="5"', 5],
    ["WAIT = 7; foo", 7],
    ["handling=lenient", undefined],
    ["wait=-1", undefined],
    ["", undefined],
  ])("reads Prefer: %s as a wait of %s s", (header, seconds) => {
    expect(preferredWaitS(header)).toBe(seconds);
  });
});

describe("§2.7 Error Scenarios: problem details (RFC 9457) with a stable type", () => {
  it("§2.7 a missing key on an operation that requires one: 400, a body that points to the documentation", async () => {
    const answer = await post("/api/v1/orders", await newToken(), [], mugs());
    expect(answer.status).toBe(400);
    expect(answer.headers["content-type"]).toBe("application/problem+json");
    expect(answer.body).toMatchObject({
      type: "/problems/idempotency-key-missing",
      code: "IDEMPOTENCY_KEY_MISSING",
    });
  });

  it("§2.7 a key reused with another payload: 422 problem details", async () => {
    const token = await newToken();
    const key = randomUUID();
    await post("/api/v1/orders", token, [key], mugs(1));
    const answer = await post("/api/v1/orders", token, [key], mugs(3));
    expect(answer.status).toBe(422);
    expect(answer.headers["content-type"]).toBe("application/problem+json");
    expect(answer.body).toMatchObject({ type: "/problems/idempotency-key-reused", status: 422 });
  });

  it("§2.7 a refused request that is corrected gets its own answer: the client corrects, then retries", async () => {
    const token = await newToken();
    const missing = await post("/api/v1/orders", token, [], mugs());
    const corrected = await post("/api/v1/orders", token, [randomUUID()], mugs());
    expect([missing.status, corrected.status]).toEqual([400, 201]);
  });
});
