import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  DIRECT_PREFIXES,
  findRouteFiles,
  parseRoute,
  type RouteHandler,
  RouteTable,
  targetOf,
} from "./route-table";

const entry = (route: string, module: Record<string, RouteHandler>) => ({
  route,
  segments: parseRoute(route),
  module,
});
const ok: RouteHandler = async (_req, { params }) => Response.json(await params);
const echo: RouteHandler = async (req, { params }) =>
  Response.json({ id: (await params).id, body: await req.text(), q: new URL(req.url).search });
const withCookies: RouteHandler = () => {
  const headers = new Headers({ "x-one": "1" });
  headers.append("set-cookie", "a=1; Path=/");
  headers.append("set-cookie", "b=2; Path=/");
  return new Response("hello", { status: 201, headers });
};
const broken: RouteHandler = () => {
  throw new Error("boom");
};

describe("route discovery", () => {
  it("finds every route handler of the app, and every one lives under a prefix served directly", () => {
    const routes = findRouteFiles(path.resolve("src/app")).map((r) => r.route);
    expect(routes).toContain("/api/trpc/[trpc]");
    expect(routes).toContain("/api/v1/orders/[orderId]/payments");
    expect(routes).toContain("/provider/api/trades/[outTradeNo]/[action]");
    // Anything outside these prefixes would be served by Next (behind the proxy), not by the fast path.
    expect(routes.filter((r) => !DIRECT_PREFIXES.some((p) => `${r}/`.startsWith(p)))).toEqual([]);
  });

  it("matches literals before dynamic segments and decodes parameters", () => {
    const table = new RouteTable([
      entry("/api/v1/orders/[orderId]", { GET: ok }),
      entry("/api/v1/orders/summary", { GET: ok }),
      entry("/api/v1/orders/[orderId]/payments", { POST: ok }),
    ]);
    expect(table.match("/api/v1/orders/summary")?.entry.route).toBe("/api/v1/orders/summary");
    expect(table.match("/api/v1/orders/a%20b")?.params).toEqual({ orderId: "a b" });
    expect(table.match("/api/v1/orders/x/payments")?.params).toEqual({ orderId: "x" });
    expect(table.match("/api/v1/orders/x/refunds")).toBeUndefined();
    expect(table.match("/api/v1/orders/%E0%A4%A")).toBeUndefined();
  });
});

describe("serving route handlers over Node's HTTP server", () => {
  let server: Server;
  let base: string;
  const onError = vi.fn();
  const fallback = vi.fn();

  beforeAll(async () => {
    const table = new RouteTable([
      entry("/api/echo/[id]", { POST: echo, GET: withCookies }),
      entry("/api/broken", { GET: broken }),
    ]);
    server = createServer((req, res) => {
      if (!table.serve(req, res, onError)) {
        fallback(req.url);
        res.writeHead(299);
        res.end("next");
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("passes method, body, query and params, and returns status, headers and every cookie", async () => {
    const posted = await fetch(`${base}/api/echo/42?x=1`, { method: "POST", body: "payload" });
    expect(await posted.json()).toEqual({ id: "42", body: "payload", q: "?x=1" });
    const got = await fetch(`${base}/api/echo/7`);
    expect(got.status).toBe(201);
    expect(got.headers.get("x-one")).toBe("1");
    expect(got.headers.getSetCookie()).toEqual(["a=1; Path=/", "b=2; Path=/"]);
    expect(await got.text()).toBe("hello");
  });

  it("answers HEAD from GET without a body, OPTIONS and unknown methods with the allowed ones", async () => {
    const head = await fetch(`${base}/api/echo/7`, { method: "HEAD" });
    expect(head.status).toBe(201);
    expect(await head.text()).toBe("");
    const options = await fetch(`${base}/api/echo/7`, { method: "OPTIONS" });
    expect(options.status).toBe(204);
    expect(options.headers.get("allow")).toBe("GET, POST, HEAD, OPTIONS");
    const put = await fetch(`${base}/api/echo/7`, { method: "PUT", body: "x" });
    expect(put.status).toBe(405);
  });

  it("refuses a body over 1 MiB with 413 before the handler runs", async () => {
    const response = await fetch(`${base}/api/echo/1`, { method: "POST", body: "x".repeat(1024 * 1024 + 1) });
    expect(response.status).toBe(413);
  });

  it("turns a throwing handler into a 500 problem that says nothing more, and reports the error once", async () => {
    const response = await fetch(`${base}/api/broken`);
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ status: 500, detail: "Internal server error" });
    expect(onError).toHaveBeenCalledTimes(1);
  });

  it("leaves pages and unknown paths to Next", async () => {
    for (const p of ["/", "/orders/1", "/api/nowhere"]) {
      expect((await fetch(`${base}${p}`)).status).toBe(299);
    }
    expect(fallback).toHaveBeenCalledTimes(3);
  });
});

describe("a request target's path and query", () => {
  it("read by hand for a plain path, as new URL reads it for every target", () => {
    for (const raw of [
      "/api/v1/orders",
      "/api/trpc/orders.create",
      "/api/v1/orders/0b0e0f36-0000-4000-8000-000000000000/refunds",
      "/",
      "/api/v1/orders/",
      "/api/v1/../v1/orders",
      "/api/./v1/orders",
      "/api/v1/orders?x=1",
      "/api/trpc/orders.list?input=%7B%22json%22%3Anull%7D",
      '/api/trpc/orders.list?input={"json":null}',
      "/api/v1/%6Frders",
      "/api/v1/ord ers",
      "//evil.example/api/v1/orders",
      "/api\\v1\\orders",
      "/api/v1/orders#fragment",
      "/api/v1/.hidden",
      "/api/v1/a..b",
    ]) {
      const url = new URL(raw, "http://localhost");
      expect(targetOf(raw), raw).toEqual({ pathname: url.pathname, search: url.search });
    }
  });
});
