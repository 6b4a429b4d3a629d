import type { IncomingMessage } from "node:http";

/**
 * HTTP as the app's API handlers see it, whichever server delivered the request: a method, headers to read
 * and a body to read once, in; a status, headers and a string body, out. `next dev` hands a route file a
 * Web `Request` and wants a `Response` (`fromWebRequest`, `toWebResponse`); the production host
 * (src/host/route-table.ts) builds a `PlainRequest` from Node's `IncomingMessage` and writes the answer to
 * its `ServerResponse`, with no Web `Request`, `Response`, stream or `AbortSignal` in between. The handler
 * is the same function either way, so both hosts answer byte for byte alike (test/plain-host.test.ts).
 */
export interface HeaderReader {
  get(name: string): string | null;
}

export interface PlainRequest {
  readonly method: string;
  /** The path and query, e.g. `/api/trpc/orders.create`. */
  readonly url: string;
  readonly headers: HeaderReader;
  /** The whole body as text (API bodies are small; the host has already bounded it). */
  text(): Promise<string>;
  /** The same request as a Web `Request`, for a handler that hands a case it does not take to one that needs it. */
  toWeb(): Promise<Request>;
}

export interface PlainResponse {
  status: number;
  headers: Record<string, string | string[]>;
  body: string;
}

/** A route handler over plain HTTP: the request and the route's path parameters. */
export type PlainHandler = (req: PlainRequest, params: Record<string, string>) => Promise<PlainResponse>;

/** A route file's handler (Web in, Web out) that also carries its plain form for the production host. */
export type RouteWithPlain = ((
  req: Request,
  context: { params: Promise<Record<string, string>> },
) => Promise<Response>) & { plain: PlainHandler };

export function fromWebRequest(req: Request): PlainRequest {
  const url = new URL(req.url);
  let body: Promise<string> | undefined;
  const text = () => {
    body ??= req.text();
    return body;
  };
  return {
    method: req.method,
    url: `${url.pathname}${url.search}`,
    headers: req.headers,
    text,
    // Once its body was read, the request is made again around the text read.
    toWeb: async () =>
      body === undefined
        ? req
        : new Request(req.url, { method: req.method, headers: req.headers, body: await text() }),
  };
}

export function toWebResponse(answer: PlainResponse): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return new Response(answer.body, { status: answer.status, headers });
}

/** Mounts a plain handler as a route file's export; the production host calls `.plain` directly. */
export function plainRoute(plain: PlainHandler): RouteWithPlain {
  const route = async (req: Request, context: { params: Promise<Record<string, string>> }) =>
    toWebResponse(await plain(fromWebRequest(req), await context.params));
  return Object.assign(route, { plain });
}

/** Node's request headers read the way `Headers.get` reads them (repeated fields joined with ", "). */
export function nodeHeaders(req: IncomingMessage): HeaderReader {
  return {
    get(name: string) {
      const value = req.headers[name.toLowerCase()];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(", ") : value;
    },
  };
}

/** A JSON answer. */
export function jsonAnswer(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): PlainResponse {
  return jsonTextAnswer(status, JSON.stringify(body), headers);
}

/** A JSON answer whose body is already text. */
export function jsonTextAnswer(
  status: number,
  body: string,
  headers: Record<string, string> = {},
): PlainResponse {
  return {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store", ...headers },
    body,
  };
}
