import type { IncomingMessage, ServerResponse } from "node:http";
import { PROBLEM_HEADERS, problemBody } from "~/shared/problem";

/**
 * What the production server refuses before any route or page sees a request:
 * a Host header that is not a host, and a path whose percent-encoding does not
 * decode. Either would reach code that builds a URL or decodes the path, and
 * throw (500). Each is answered 400 with a problem body; the connection stays
 * usable (the answer says how long its body is, and a request with such a path
 * or Host has its body drained by Node as usual).
 */

/** A DNS name or IPv4 address (letters, digits, `-`, `_`, `.`) or a bracketed IPv6 address, then an optional port. */
const HOST = /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/;

/** Host headers found well-formed (a server hears the same few on every request). */
const goodHosts = new Set<string>();

export function malformedHost(host: string | undefined): string | undefined {
  // Node itself answers 400 to an HTTP/1.1 request without Host (requireHostHeader).
  if (host === undefined || goodHosts.has(host)) return undefined;
  const match = HOST.exec(host);
  if (!match || (match[1] !== undefined && Number(match[1]) > 65_535)) {
    return "The Host header is not a host name with an optional port.";
  }
  try {
    new URL(`http://${host}`);
  } catch {
    return "The Host header is not a host name with an optional port.";
  }
  // Bounded: a client inventing hosts only makes the check run each time again.
  if (goodHosts.size < 256) goodHosts.add(host);
  return undefined;
}

export function malformedTarget(target: string | undefined): string | undefined {
  if (!target?.startsWith("/")) return "The request target must be a path starting with /.";
  const path = target.split("?", 1)[0] ?? "";
  try {
    decodeURIComponent(path);
  } catch {
    return "The path has a broken percent-encoding (each % must start a valid UTF-8 escape, like %2F).";
  }
  return undefined;
}

/** Answers a malformed request with 400 and returns true; returns false for a well-formed one. */
export function refuseMalformed(req: IncomingMessage, res: ServerResponse): boolean {
  const detail = malformedTarget(req.url) ?? malformedHost(req.headers.host);
  if (!detail) return false;
  sendProblem(res, 400, "MALFORMED_REQUEST", detail);
  return true;
}

/** An RFC 9457 problem, written straight to Node's response. */
export function sendProblem(
  res: ServerResponse,
  status: number,
  code: string,
  detail: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify(problemBody(status, code, detail));
  res.writeHead(status, { ...PROBLEM_HEADERS, "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}
