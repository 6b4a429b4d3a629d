import { readdirSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { nodeHeaders, type PlainHandler, type PlainRequest, type PlainResponse } from "~/shared/plain-http";
import { BUNDLED_ROUTES } from "./bundled-routes";
import { sendProblem } from "./http-guard";
import { bodyLimitOf, DRAIN_BODY_BYTES, lingerBeforeClose } from "./limits";

/**
 * Serves the App Router's route handlers (`src/app/**\/route.ts`) straight from
 * Node's HTTP server, the way Next calls them — a `Request` in, a `Response`
 * out, `params` as a promise — but without Next's per-request pipeline, which
 * costs more CPU per API call than the whole idempotent order transaction (see
 * ./server.ts). Pages still go to Next. The route files stay
 * the one definition of every API: `next dev` serves the same files.
 *
 * Only handlers that depend on nothing but the Web `Request` belong here; ours
 * are all under /api and /provider/api, which the proxy (src/proxy.ts) skips,
 * so nothing Next would have run before them is lost.
 */

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;
type Method = (typeof METHODS)[number];
type Params = Record<string, string>;
export type RouteHandler = ((
  req: Request,
  context: { params: Promise<Params> },
) => Response | Promise<Response>) & {
  /** The same handler over plain HTTP (src/shared/plain-http.ts): called with no Web Request or Response. */
  plain?: PlainHandler;
};
type RouteModule = Partial<Record<Method, RouteHandler>>;

/** Segments of a route: literal text, or a dynamic `[name]` segment. */
type Segment = { literal: string } | { param: string };

export interface RouteEntry {
  /** The route as Next names it, e.g. /api/v1/orders/[orderId]. */
  route: string;
  segments: Segment[];
  module: RouteModule;
}

/** Prefixes served directly: the proxy skips them, and nothing but route handlers lives there. */
export const DIRECT_PREFIXES = ["/api/", "/provider/api/"];

/** Every route.ts under `appDir`, as Next's file-system router names it. */
export function findRouteFiles(appDir: string): { route: string; file: string }[] {
  const found: { route: string; file: string }[] = [];
  const walk = (dir: string, segments: string[]) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        // Route groups "(name)" do not appear in the URL.
        const next = /^\(.*\)$/.test(entry.name) ? segments : [...segments, entry.name];
        walk(path.join(dir, entry.name), next);
      } else if (entry.name === "route.ts") {
        found.push({ route: `/${segments.join("/")}`, file: path.join(dir, entry.name) });
      }
    }
  };
  walk(appDir, []);
  return found.sort((a, b) => a.route.localeCompare(b.route));
}

/** The route files under `appDir` that this server calls directly (those under DIRECT_PREFIXES). */
export function directRouteFiles(appDir: string): { route: string; file: string }[] {
  return findRouteFiles(appDir).filter(({ route }) =>
    DIRECT_PREFIXES.some((prefix) => `${route}/`.startsWith(prefix)),
  );
}

export function parseRoute(route: string): Segment[] {
  return route
    .split("/")
    .filter(Boolean)
    .map((part) => {
      if (part.startsWith("[...") || part.startsWith("[[")) {
        throw new Error(`catch-all segments are not supported here: ${route}`);
      }
      return part.startsWith("[") && part.endsWith("]") ? { param: part.slice(1, -1) } : { literal: part };
    });
}

/**
 * Loads the route handlers under the direct prefixes: the files under `appDir`, or in the production server's
 * bundle the same files as they were when it was built (./bundled-routes.ts).
 */
export async function loadRouteHandlers(appDir: string): Promise<RouteTable> {
  const found = BUNDLED_ROUTES
    ? Object.entries(BUNDLED_ROUTES).map(([route, load]) => ({ route, load }))
    : directRouteFiles(appDir).map(({ route, file }) => ({
        route,
        load: () => import(pathToFileURL(file).href),
      }));
  const entries: RouteEntry[] = [];
  for (const { route, load } of found) {
    entries.push({ route, segments: parseRoute(route), module: (await load()) as RouteModule });
  }
  return new RouteTable(entries);
}

export class RouteTable {
  private readonly entries: RouteEntry[];

  constructor(entries: RouteEntry[]) {
    // Next's precedence: at each segment a literal beats a dynamic segment.
    this.entries = [...entries].sort((a, b) => specificity(b) - specificity(a));
  }

  get routes(): string[] {
    return this.entries.map((e) => e.route);
  }

  match(pathname: string): { entry: RouteEntry; params: Params } | undefined {
    const parts = pathname.split("/").filter(Boolean);
    for (const entry of this.entries) {
      const params = matchSegments(entry.segments, parts);
      if (params) return { entry, params };
    }
    return undefined;
  }

  /**
   * Answers the request if a route handler owns its path; returns false to let
   * Next handle it.
   */
  serve(req: IncomingMessage, res: ServerResponse, onError: (err: unknown) => void): boolean {
    const url = targetOf(req.url ?? "/");
    if (!DIRECT_PREFIXES.some((prefix) => url.pathname.startsWith(prefix))) return false;
    const found = this.match(url.pathname);
    if (!found) return false;
    const method = (req.method ?? "GET").toUpperCase();
    const allowed = METHODS.filter((m) => found.entry.module[m]);
    const handler = found.entry.module[(method === "HEAD" ? "GET" : method) as Method];
    if (!handler) {
      const allow = [...allowed, ...(allowed.includes("GET") ? ["HEAD"] : []), "OPTIONS"].join(", ");
      res.writeHead(method === "OPTIONS" ? 204 : 405, { allow });
      res.end();
      return true;
    }
    void callHandler(handler, found.params, req, res, url).catch((err: unknown) => {
      onError(err);
      if (res.headersSent) res.end();
      else sendProblem(res, 500, "INTERNAL_ERROR", "Internal server error");
    });
    return true;
  }
}

/** A request target's path and query, as `new URL` reads them. */
interface Target {
  pathname: string;
  search: string;
}

/** Path segments `new URL` leaves as they are: no dot segment, nothing to encode, no query to encode. */
const PLAIN_PATH = /^(?:\/[\w-]+(?:\.[\w-]+)*)+$/;

/** Taken as it is when it is a plain path (an API call's), else read by `new URL` (which normalises). */
export function targetOf(raw: string): Target {
  if (PLAIN_PATH.test(raw)) return { pathname: raw, search: "" };
  const url = new URL(raw, "http://localhost");
  return { pathname: url.pathname, search: url.search };
}

function specificity(entry: RouteEntry): number {
  // A literal at position i outweighs anything after it.
  return entry.segments.reduce(
    (score, segment, i) => score + ("literal" in segment ? 2 ** (20 - i) : 0),
    entry.segments.length,
  );
}

function matchSegments(segments: Segment[], parts: string[]): Params | undefined {
  if (segments.length !== parts.length) return undefined;
  const params: Params = {};
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as Segment;
    const part = parts[i] as string;
    if ("literal" in segment) {
      if (segment.literal !== part) return undefined;
    } else {
      try {
        params[segment.param] = decodeURIComponent(part);
      } catch {
        return undefined;
      }
    }
  }
  return params;
}

async function callHandler(
  handler: RouteHandler,
  params: Params,
  req: IncomingMessage,
  res: ServerResponse,
  url: Target,
): Promise<void> {
  const limit = bodyLimitOf(url.pathname);
  const body = await bodyOf(req, limit);
  if (body === "too-large" || body === "too-large-to-drain") {
    // Past what is worth draining on a kept connection, the connection closes after the answer: gracefully, so
    // that a client still sending its body reads the answer (lingerBeforeClose).
    const close: Record<string, string> = {};
    if (body === "too-large-to-drain") {
      close.connection = "close";
      lingerBeforeClose(req);
    }
    sendProblem(res, 413, "PAYLOAD_TOO_LARGE", `The body is larger than ${limit} bytes.`, close);
    return;
  }
  if (handler.plain) {
    writePlain(req, res, await handler.plain(plainRequest(req, url, body), params));
    return;
  }
  const response = await handler(toRequest(req, url, body), { params: Promise.resolve(params) });
  const answer = Buffer.from(await response.arrayBuffer());
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, key) => {
    if (key !== "set-cookie") headers[key] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  // The whole answer is here: its length, rather than a chunked body.
  headers["content-length"] = String(answer.length);
  res.writeHead(response.status, headers);
  res.end(req.method === "HEAD" ? undefined : answer);
}

/**
 * The body is read whole (API bodies are small) before the handler runs, and a
 * client that hangs up does not abort the handler: work the server started is
 * finished and committed, so a retry with the same key finds it. A body over the
 * limit is drained, not kept (see DRAIN_BODY_BYTES). GET and HEAD have none.
 */
async function bodyOf(
  req: IncomingMessage,
  limit: number,
): Promise<Buffer<ArrayBuffer> | undefined | "too-large" | "too-large-to-drain"> {
  const method = req.method ?? "GET";
  if (method === "GET" || method === "HEAD") return undefined;
  // Declared over the limit: refused before a byte of it is read (Node drops the rest of a body it can
  // still drain, so the keep-alive connection goes on; past that the connection is closed).
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) return declared > DRAIN_BODY_BYTES ? "too-large-to-drain" : "too-large";
  return readBody(req, limit);
}

/** The body decoded as `Request.text()` decodes it (UTF-8, a leading BOM dropped, bad bytes replaced). */
const utf8 = new TextDecoder();

function plainRequest(
  req: IncomingMessage,
  url: Target,
  body: Buffer<ArrayBuffer> | undefined,
): PlainRequest {
  let text: string | undefined;
  return {
    method: req.method ?? "GET",
    url: `${url.pathname}${url.search}`,
    headers: nodeHeaders(req),
    text: async () => {
      text ??= body ? utf8.decode(body) : "";
      return text;
    },
    toWeb: async () => toRequest(req, url, body),
  };
}

/**
 * A plain answer on Node's response, its headers in the order the Web path below writes them: names in lower
 * case and sorted, then the cookies.
 */
function writePlain(req: IncomingMessage, res: ServerResponse, answer: PlainResponse): void {
  const headers: Record<string, string | string[]> = {};
  const names = Object.keys(answer.headers).map((name) => [name.toLowerCase(), name] as const);
  for (const [lower, name] of names.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (lower !== "set-cookie") headers[lower] = answer.headers[name] as string | string[];
  }
  const cookies = names.find(([lower]) => lower === "set-cookie");
  if (cookies) headers["set-cookie"] = answer.headers[cookies[1]] as string | string[];
  headers["content-length"] = String(Buffer.byteLength(answer.body));
  res.writeHead(answer.status, headers);
  // As text, Node sends the head and the body in one write (a Buffer body goes out as a writev of two).
  res.end(req.method === "HEAD" ? undefined : answer.body);
}

function toRequest(req: IncomingMessage, url: Target, body: Buffer<ArrayBuffer> | undefined): Request {
  const headers = new Headers();
  for (const [key, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(key, v);
    else headers.set(key, value);
  }
  // The Host was checked by the server's guard (./http-guard.ts) before routing.
  const full = new URL(`${url.pathname}${url.search}`, `http://${req.headers.host ?? "localhost"}`);
  const method = req.method ?? "GET";
  return new Request(full, body === undefined ? { method, headers } : { method, headers, body });
}

/** The body, or "too-large-to-drain" for a chunked one that runs past the limit (left unread; the connection closes). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer<ArrayBuffer> | "too-large-to-drain"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.pause();
        resolve("too-large-to-drain");
      } else chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
  });
}
