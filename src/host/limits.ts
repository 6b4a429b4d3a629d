import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";

/**
 * What one client, or all of them together, may hold of the production server: how large a body each route
 * takes, how long a request may take to arrive, and how many connections may be open. A client that sends
 * a large Content-Length and then stalls, a thousand times, must cost the server neither memory nor its
 * ability to answer everyone else.
 */

/** A body's limit per path: the first prefix that matches. Small, because API bodies are small. */
export const BODY_LIMITS: readonly { prefix: string; bytes: number }[] = [
  // The provider's notifications (MockPay's are a few hundred bytes; real providers' a few KB).
  { prefix: "/api/payments/notify", bytes: 64 * 1024 },
  // tRPC may batch several calls in one body.
  { prefix: "/api/trpc/", bytes: 64 * 1024 },
  { prefix: "/api/", bytes: 16 * 1024 },
  { prefix: "/provider/api/", bytes: 16 * 1024 },
];

export function bodyLimitOf(pathname: string): number {
  return BODY_LIMITS.find((limit) => pathname.startsWith(limit.prefix))?.bytes ?? 16 * 1024;
}

/**
 * A body over its limit is refused at once from its Content-Length (nothing of it is kept), and still read
 * and dropped up to this size so the keep-alive connection stays usable; past it the connection is closed.
 */
export const DRAIN_BODY_BYTES = 2 * 1024 * 1024;

/**
 * How long, and how much more, a connection answered before its body was read keeps reading (and dropping)
 * before it closes: a lingering close, as nginx's and Apache's. Closed at once, the socket would meet the rest
 * of the body with a reset, and a client still sending (a browser, Node's fetch: neither waits for `100
 * Continue`) would lose the answer with it.
 */
export const LINGER_MS = 2_000;
export const LINGER_BYTES = 16 * 1024 * 1024;

/**
 * When the server closes this request's connection after its answer, the close lingers: the answer and a
 * FIN go out, the rest of the body is read and dropped until the client closes its side, LINGER_MS pass or
 * LINGER_BYTES more arrive; then the connection is closed.
 */
export function lingerBeforeClose(req: IncomingMessage): void {
  const socket = req.socket;
  // The rest of the body is read and dropped (a body read in part was paused when it ran past its limit).
  req.removeAllListeners("data");
  req.resume();
  // Node closes a connection it will not keep with destroySoon(): this one ends, then lingers.
  socket.destroySoon = () => {
    if (socket.writable) socket.end();
    const from = socket.bytesRead;
    const close = () => {
      clearTimeout(deadline);
      clearInterval(watch);
      socket.destroy();
    };
    const deadline = setTimeout(close, LINGER_MS);
    const watch = setInterval(() => {
      if (socket.bytesRead - from > LINGER_BYTES) close();
    }, 50);
    socket.once("end", close);
    socket.once("close", close);
  };
}

export interface ConnectionLimits {
  /** Open connections one client address may hold; past it, a new one is answered 429 and closed. */
  perAddress: number;
  /** Open connections in all; past it, a new one is answered 503 and closed. */
  total: number;
  /** The whole request (headers and body) must arrive within this many ms, or the connection is closed. */
  requestTimeoutMs: number;
  /** The headers must arrive within this many ms. */
  headersTimeoutMs: number;
}

/** Node's own timeouts, set on the server; its clock for them ticks every second rather than every 30. */
export function serverTimeouts(limits: ConnectionLimits) {
  return {
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
    connectionsCheckingInterval: 1_000,
  };
}

const refusal = (status: string) =>
  `HTTP/1.1 ${status}\r\ncontent-type: application/problem+json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: `;

/** Connections answered with a refusal: a request that still arrives on one is never served. */
const refused = new WeakSet<Socket>();
export const wasRefused = (socket: Socket) => refused.has(socket);

function refuse(socket: Socket, status: string, code: string, detail: string) {
  refused.add(socket);
  const body = JSON.stringify({
    type: "about:blank",
    title: code,
    status: Number(status.slice(0, 3)),
    code,
    detail,
  });
  socket.end(`${refusal(status)}${Buffer.byteLength(body)}\r\n\r\n${body}`, () => socket.destroy());
}

/**
 * Counts open connections per client address (the socket's peer: behind a trusted proxy every connection
 * is the proxy's, so the per-address cap is left to the proxy then) and in all, and refuses those past the
 * caps with a short answer before any request is read.
 */
export function capConnections(server: Server, limits: ConnectionLimits, options: { perAddress: boolean }) {
  const open = new Map<string, number>();
  let total = 0;
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "unknown";
    const mine = open.get(address) ?? 0;
    if (total >= limits.total) {
      refuse(
        socket,
        "503 Service Unavailable",
        "TOO_MANY_CONNECTIONS",
        "The server is at its connection limit; try again shortly.",
      );
      return;
    }
    if (options.perAddress && mine >= limits.perAddress) {
      refuse(
        socket,
        "429 Too Many Requests",
        "TOO_MANY_CONNECTIONS",
        `At most ${limits.perAddress} open connections per client address.`,
      );
      return;
    }
    total++;
    open.set(address, mine + 1);
    socket.once("close", () => {
      total--;
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}
