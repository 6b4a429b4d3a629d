import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { payRequestSchema, SIGNATURE_HEADER, signPayRequest } from "~/shared/provider-contract";
import {
  type AppServer,
  HttpShopper,
  startAppServer,
  TEST_SERVER_ADMIN_TOKEN,
  TEST_SERVER_WEBHOOK_SECRET,
} from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { type RawAnswer, rawExchange, rawGet } from "./support/raw-http";

/**
 * Malformed HTTP against the production server: every malformed request gets a 4xx
 * with a problem body, and the connection it came on stays usable (or is closed by
 * the server with `Connection: close`, never left stalled).
 */
let database: TestDatabase;
let server: AppServer;
let port: number;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 2 });
  server = await startAppServer({ databaseUrl: database.url });
  port = Number(new URL(server.baseUrl).port);
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await database?.drop();
});

const healthy = rawGet("/api/trpc/catalog.list");

async function countRows() {
  const [row] = await database.sql<{ orders: number; notifications: number }[]>`
    SELECT (SELECT count(*)::int FROM orders) AS orders,
           (SELECT count(*)::int FROM payment_notification) AS notifications`;
  return row;
}

function expectProblem(answer: RawAnswer | undefined, status: number) {
  expect(answer?.status, `${answer?.status} ${answer?.body.slice(0, 160)}`).toBe(status);
  expect(answer?.headers["content-type"]).toMatch(/json/);
  expect(JSON.parse(answer?.body ?? "{}")).toMatchObject({ status, title: expect.any(String) });
}

describe("malformed Host headers", () => {
  for (const host of ["a b", "[", "x:99999", "%zz", "a/b", "a@b"]) {
    for (const path of ["/", "/api/v1/orders", "/api/trpc/catalog.list", "/provider/pay/P1"]) {
      it(`Host ${JSON.stringify(host)} on ${path}: 400, then the connection still serves`, async () => {
        const { answers } = await rawExchange(port, [rawGet(path, host), healthy]);
        expectProblem(answers[0], 400);
        expect(answers[1]?.status).toBe(200);
      });
    }
  }
});

describe("broken percent-encoding in the path", () => {
  for (const path of [
    "/api/v1/orders/%ZZ",
    "/api/trpc/%ZZ",
    "/orders/%ZZ",
    "/provider/pay/%E0%A4%A",
    "/provider/api/trades/%C0%AF",
    "/%",
  ]) {
    it(`${path}: 400, then the connection still serves`, async () => {
      const { answers } = await rawExchange(port, [rawGet(path), healthy]);
      expectProblem(answers[0], 400);
      expect(answers[1]?.status).toBe(200);
    });
  }
});

describe("bodies", () => {
  it("an oversized body is refused with 413 and drained: the same connection serves the next request", async () => {
    const before = await countRows();
    const big = "x".repeat(2 * 1024 * 1024);
    const { answers } = await rawExchange(port, [
      `POST /api/trpc/orders.create HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${big.length}\r\n\r\n${big}`,
      healthy,
    ]);
    expectProblem(answers[0], 413);
    expect(answers[0]?.headers.connection).not.toBe("close");
    expect(answers[1]?.status).toBe(200);
    // fetch's pooled connections, as a provider retrying would use them.
    for (let i = 0; i < 3; i++) {
      const refused = await fetch(`${server.baseUrl}/api/payments/notify`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: big,
      });
      expect(refused.status).toBe(413);
      expect((await new HttpShopper(server.baseUrl).query("catalog.list")).status).toBe(200);
    }
    expect(await countRows()).toEqual(before);
  });

  it("a body declared past what is worth draining is refused at once and its connection closed", async () => {
    const { answers, closed } = await rawExchange(port, [
      `POST /api/v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${64 * 1024 * 1024}\r\n\r\n{"items":`,
      healthy,
    ]);
    expectProblem(answers[0], 413);
    expect(answers[0]?.headers.connection).toBe("close");
    expect(answers).toHaveLength(1);
    expect(closed).toBe(true);
  });

  it("tRPC answers a body that is not its envelope with a clean 400, not the parser's own words", async () => {
    const shopper = new HttpShopper(server.baseUrl);
    await shopper.visit("/api/trpc/catalog.list");
    for (const body of [
      "null",
      "[]",
      '"x"',
      "{",
      `${"[".repeat(20_000)}${"]".repeat(20_000)}`,
      `{"json":${"[".repeat(20_000)}${"]".repeat(20_000)}}`,
      `{"json":{},"meta":{"values":${"[".repeat(20_000)}${"]".repeat(20_000)}}}`,
      '{"json":{},"meta":{"values":{"a":["nonsense"]}}}',
    ]) {
      const response = await fetch(`${server.baseUrl}/api/trpc/orders.create`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie: shopper.sessionCookie },
        body,
      });
      const text = await response.text();
      expect(response.status, body.slice(0, 20)).toBe(400);
      expect(text, body.slice(0, 20)).not.toMatch(/destructure|call stack|null \(reading|TypeError|at /i);
    }
  });
});

describe("MockPay's admin endpoint", () => {
  const admin = { authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` };

  it("answers a JSON or text body with 400, not 500", async () => {
    for (const [type, body] of [
      ["application/json", '{"action":"REORDER"}'],
      ["text/plain", "action=REORDER"],
    ] as const) {
      const response = await fetch(`${server.baseUrl}/provider/api/admin/trades/P1`, {
        method: "POST",
        headers: { ...admin, "content-type": type },
        body,
      });
      expect(response.status, type).toBe(400);
      expect(await response.json()).toMatchObject({ code: "BAD_FORM" });
    }
  });

  it("keeps a trade number with CR LF out of its redirect's headers", async () => {
    const response = await fetch(`${server.baseUrl}/provider/api/admin/trades/P%0d%0aSet-Cookie:%20x=1`, {
      method: "POST",
      headers: { ...admin, "content-type": "application/x-www-form-urlencoded" },
      body: "action=REORDER",
      redirect: "manual",
    });
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toMatch(/#trade-P%0D%0ASet-Cookie%3A%20x%3D1$/);
    expect(response.headers.get("set-cookie")).toBeNull();
  });
});

describe("tRPC batches", () => {
  const batch = (n: number) =>
    `${server.baseUrl}/api/trpc/${Array(n).fill("catalog.list").join(",")}?batch=1&input=${encodeURIComponent(
      JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [i, {}]))),
    )}`;

  it("carry at most 10 calls: 10 are served, 11 are refused whole with 400", async () => {
    const ten = await fetch(batch(10));
    expect(ten.status).toBe(200);
    expect(await ten.json()).toHaveLength(10);
    const eleven = await fetch(batch(11));
    expect(eleven.status).toBe(400);
    expect(await eleven.text()).toMatch(/Batch call exceeds maximum size/);
  });
});

describe("malformed HTTP, generated (fast-check)", () => {
  const printable = fc.string({
    unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  });
  const percentEscape = fc.oneof(
    fc.constantFrom("%", "%Z", "%ZZ", "%E0%A4%A", "%C0%AF", "%FF", "%0d%0a", "%00", "%2F", "%25"),
    fc.stringMatching(/^%[0-9A-Fa-f]{2}$/),
  );
  const path = fc
    .tuple(
      fc.constantFrom(
        "/",
        "/orders/",
        "/api/v1/orders/",
        "/api/trpc/",
        "/api/payments/notify",
        "/provider/pay/",
        "/provider/api/trades/",
        "/admin/",
      ),
      fc.array(fc.oneof(percentEscape, fc.stringMatching(/^[A-Za-z0-9._~-]{0,6}$/)), { maxLength: 4 }),
    )
    .map(([prefix, parts]) => `${prefix}${parts.join("")}`);
  const request = fc.record({
    method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "OPTIONS", "HEAD"),
    path,
    host: fc.oneof(
      fc.constant("127.0.0.1"),
      printable.filter((h) => h.length > 0),
    ),
    contentType: fc.constantFrom(
      "application/json",
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/xml",
    ),
    body: fc.oneof(fc.constant(""), fc.json(), fc.string({ maxLength: 200 })),
    // A body shorter than its declared length, cut off: the server must not wait for the rest forever.
    truncated: fc.boolean(),
  });

  it("never answers 5xx, and the connection serves a normal request afterwards (or the server closed it)", async () => {
    const before = await countRows();
    await fc.assert(
      fc.asyncProperty(request, async ({ method, path, host, contentType, body, truncated }) => {
        const bytes = Buffer.from(body);
        const declared = truncated && bytes.length > 0 ? bytes.length + 10 : bytes.length;
        const head = `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\ncontent-type: ${contentType}\r\ncontent-length: ${declared}\r\n\r\n`;
        const raw = Buffer.concat([Buffer.from(head, "latin1"), bytes]);
        if (truncated && bytes.length > 0) {
          // Cut off: the answer may wait for the body; what matters is no 5xx and no crash.
          const { answers } = await rawExchange(port, [raw], 1_000);
          for (const answer of answers) expect(answer.status, `${method} ${path}`).toBeLessThan(500);
          return;
        }
        const { answers, closed } = await rawExchange(port, [raw, healthy]);
        expect(answers[0]?.status, `${method} ${path} Host ${host}`).toBeLessThan(500);
        if (answers[0]?.headers.connection !== "close" && !closed) {
          expect(answers[1]?.status, `then, after ${method} ${path} Host ${host}`).toBe(200);
        }
      }),
      { numRuns: 150, seed: 20261204 },
    );
    // The server is still whole, and nothing was written (a refused notification is only counted).
    expect((await new HttpShopper(server.baseUrl).query("catalog.list")).status).toBe(200);
    expect(await countRows()).toEqual(before);
  }, 120_000);
});

describe("unverified notifications", () => {
  it("one naming a shopper's payment is refused 401, counted, and never reaches that payment's timeline", async () => {
    const shopper = new HttpShopper(server.baseUrl);
    await shopper.visit("/api/trpc/catalog.list");
    const order = await shopper.mutation("orders.create", {
      requestId: crypto.randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const orderId = String(order.body.result?.data.json.orderId);
    const pay = await shopper.mutation("payments.create", { orderId });
    const outTradeNo = String(pay.body.result?.data.json.outTradeNo);
    const before = await countRows();
    for (const signature of [
      undefined,
      "t=1,v1=00",
      `t=${Math.floor(Date.now() / 1000)},v1=${"ab".repeat(32)}`,
    ]) {
      const answer = await fetch(`${server.baseUrl}/api/payments/notify`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(signature ? { [SIGNATURE_HEADER]: signature } : {}),
        },
        body: JSON.stringify({
          id: "N-forged",
          type: "<b>your refund is ready, call us</b>",
          out_trade_no: outTradeNo,
          app_id: "app_demo",
          amount_cents: 1250,
          currency: "USD",
        }),
      });
      expect(answer.status).toBe(401);
    }
    expect((await countRows())?.orders).toEqual(before?.orders);
    const [stored] = await database.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM payment_notification WHERE out_trade_no = ${outTradeNo}`;
    expect(stored?.n).toBe(0);
    const timeline = await shopper.query("payments.timeline", { orderId });
    expect(timeline.status).toBe(200);
    expect(JSON.stringify(timeline.body)).not.toContain("refund is ready");
  });
});

describe("secure defaults on every answer", () => {
  it("pages and APIs say nosniff, refuse framing, keep the referrer in the site, and carry a CSP", async () => {
    const pages = ["/", "/provider/pay/P1", "/orders/0b0e0f36-0000-4000-8000-000000000000", "/api/nowhere"];
    const apis = ["/api/trpc/catalog.list", "/api/v1/openapi.json", "/provider/api/trades/P1"];
    for (const path of [...pages, ...apis]) {
      const response = await fetch(`${server.baseUrl}${path}`);
      expect(response.headers.get("x-content-type-options"), path).toBe("nosniff");
      expect(response.headers.get("x-frame-options"), path).toBe("DENY");
      expect(response.headers.get("referrer-policy"), path).toBe("same-origin");
      expect(response.headers.get("content-security-policy"), path).toMatch(/frame-ancestors 'none'/);
      // A page may load this site's own scripts and styles; an API answer is never a document that loads any.
      expect(response.headers.get("content-security-policy"), path).toMatch(
        apis.includes(path) ? /^default-src 'none'/ : /^default-src 'self'/,
      );
    }
  });

  it("a page that hands out a session cannot be kept by a shared cache", async () => {
    const first = await fetch(`${server.baseUrl}/`);
    expect(first.headers.get("set-cookie")).toMatch(/^checkout_session=/);
    const cacheControl = first.headers.get("cache-control") ?? "";
    expect(cacheControl).toMatch(/no-store/);
    expect(cacheControl).toMatch(/private/);
    expect(cacheControl).not.toMatch(/s-maxage/);
  });

  it("the admin cookie holds a signed session, not the admin token", async () => {
    const response = await fetch(`${server.baseUrl}/admin?token=${TEST_SERVER_ADMIN_TOKEN}`, {
      redirect: "manual",
    });
    expect(response.status).toBe(303);
    const cookie = response.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/^admin_token=\d+\.[\w-]+; /);
    expect(cookie).not.toContain(TEST_SERVER_ADMIN_TOKEN);
    const admin = await fetch(`${server.baseUrl}/admin`, { headers: { cookie: cookie.split(";")[0] ?? "" } });
    expect(admin.status).toBe(200);
  });
});

describe("MockPay's Confirm and Cancel", () => {
  /** A shopper's order with a payment opened at MockPay: its signed pay link. */
  async function openPayment() {
    const shopper = new HttpShopper(server.baseUrl);
    await shopper.visit("/api/trpc/catalog.list");
    const order = await shopper.mutation("orders.create", {
      requestId: crypto.randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const pay = await shopper.mutation("payments.create", {
      orderId: String(order.body.result?.data.json.orderId),
    });
    const payUrl = new URL(String(pay.body.result?.data.json.payUrl), server.baseUrl);
    expect((await fetch(payUrl)).status).toBe(200);
    const outTradeNo = String(pay.body.result?.data.json.outTradeNo);
    return { outTradeNo, fields: payUrl.searchParams };
  }
  const post = (
    outTradeNo: string,
    action: string,
    body?: URLSearchParams,
    headers: Record<string, string> = {},
  ) =>
    fetch(`${server.baseUrl}/provider/api/trades/${encodeURIComponent(outTradeNo)}/${action}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: body?.toString() ?? "",
      redirect: "manual",
    });
  const tradeStatus = async (outTradeNo: string) =>
    (
      await database.sql<
        { status: string }[]
      >`SELECT status FROM provider_trade WHERE out_trade_no = ${outTradeNo}`
    )[0]?.status;

  it("knowing the trade number is not enough: without the signed link, or with a forged one, nothing happens", async () => {
    const { outTradeNo, fields } = await openPayment();
    expect((await post(outTradeNo, "cancel")).status).toBe(400);
    expect((await post(outTradeNo, "confirm")).status).toBe(400);
    const forged = new URLSearchParams(fields);
    forged.set("sig", "0".repeat(64));
    expect((await post(outTradeNo, "cancel", forged)).status).toBe(403);
    // The link of another trade does not act on this one.
    const other = await openPayment();
    expect((await post(outTradeNo, "cancel", other.fields)).status).toBe(400);
    expect(await tradeStatus(outTradeNo)).toBe("WAITING");
  });

  it("a form posted from another site is refused, even with the link; from the page itself it works", async () => {
    const { outTradeNo, fields } = await openPayment();
    expect((await post(outTradeNo, "cancel", fields, { origin: "https://evil.example" })).status).toBe(403);
    expect(await tradeStatus(outTradeNo)).toBe("WAITING");
    const own = await post(outTradeNo, "cancel", fields, { origin: server.baseUrl });
    expect(own.status).toBe(303);
    expect(await tradeStatus(outTradeNo)).toBe("CLOSED");
  });

  it("an expired link acts on nothing", async () => {
    const { outTradeNo, fields } = await openPayment();
    const request = Object.fromEntries(fields) as Record<string, string>;
    const { sig: _sig, ...rest } = request;
    const expired = { ...rest, expires_at: String(Math.floor(Date.now() / 1000) - 5) };
    const signed = new URLSearchParams({
      ...expired,
      sig: signPayRequest(TEST_SERVER_WEBHOOK_SECRET, payRequestSchema.omit({ sig: true }).parse(expired)),
    });
    expect((await post(outTradeNo, "confirm", signed)).status).toBe(410);
    expect(await tradeStatus(outTradeNo)).toBe("WAITING");
  });
});

describe("cross-site posts to tRPC", () => {
  it("a form, text/plain or multipart post with the shopper's cookie makes no order", async () => {
    const shopper = new HttpShopper(server.baseUrl);
    await shopper.visit("/api/trpc/catalog.list");
    // Orders only: MockPay may still be delivering earlier tests' notifications.
    const before = (await countRows())?.orders;
    const input = JSON.stringify({
      json: { requestId: crypto.randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] },
    });
    const multipart = new FormData();
    multipart.set("json", input);
    for (const [type, body] of [
      ["text/plain", input],
      ["application/x-www-form-urlencoded", `json=${encodeURIComponent(input)}`],
      [undefined, multipart],
    ] as const) {
      const response = await fetch(`${server.baseUrl}/api/trpc/orders.create`, {
        method: "POST",
        headers: {
          cookie: shopper.sessionCookie,
          origin: "https://evil.example",
          ...(type ? { "content-type": type } : {}),
        },
        body,
      });
      expect(response.status, String(type)).toBeGreaterThanOrEqual(400);
      expect(response.status, String(type)).toBeLessThan(500);
    }
    expect((await countRows())?.orders).toEqual(before);
  });
});

describe("what already held, kept holding", () => {
  it("the operator pages stay shut behind path tricks without the admin token", async () => {
    for (const path of [
      "/admin",
      "/admin/",
      "//admin",
      "/admin?x=1",
      "/%61dmin",
      "/./admin",
      "/provider/admin",
      "/provider//admin",
      "/provider/admin/",
      "/api/metrics",
      "/api/admin/jobs/1/retry",
    ]) {
      const response = await fetch(`${server.baseUrl}${path}`, { redirect: "manual" });
      const body = await response.text();
      // Shut (401), not there (404/405/400), or sent to the canonical path, which is shut.
      expect([301, 307, 308, 400, 401, 404, 405], `${path}: ${response.status}`).toContain(response.status);
      expect(body, path).not.toMatch(
        /Reconciliation|Dead letters|checkout_outbox_lag_seconds|Fire N identical/,
      );
    }
  });

  it("pages that echo their input escape it", async () => {
    const script = "<script>alert(1)</script>";
    const admin = { cookie: "", authorization: `Bearer ${TEST_SERVER_ADMIN_TOKEN}` };
    for (const [path, headers] of [
      [`/provider/admin?message=${encodeURIComponent(script)}`, admin],
      [`/provider/pay/${encodeURIComponent(script)}?out_trade_no=${encodeURIComponent(script)}`, {}],
      [`/orders/${encodeURIComponent(script)}`, {}],
    ] as const) {
      const response = await fetch(`${server.baseUrl}${path}`, { headers });
      expect(response.status, path).toBeLessThan(500);
      expect(await response.text(), path).not.toContain(script);
    }
  });
});
