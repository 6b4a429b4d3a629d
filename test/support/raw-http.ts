import { connect } from "node:net";

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends raw HTTP/1.1 bytes on one connection and reads the answers, as a hostile
 * client would (fetch refuses to send a malformed Host or a broken path). Each
 * request is written once the previous answer has arrived, so the test sees
 * whether the connection is still usable after each one. Bounded in time.
 */
export async function rawExchange(
  port: number,
  requests: (string | Buffer)[],
  timeoutMs = 5_000,
): Promise<{ answers: RawAnswer[]; closed: boolean }> {
  const socket = connect(port, "127.0.0.1");
  socket.setNoDelay(true);
  const answers: RawAnswer[] = [];
  let buffer = Buffer.alloc(0);
  let closed = false;
  let wake: () => void = () => {};
  socket.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    wake();
  });
  socket.on("close", () => {
    closed = true;
    wake();
  });
  socket.on("error", () => {
    closed = true;
    wake();
  });
  const deadline = Date.now() + timeoutMs;
  const waitFor = async (predicate: () => boolean) => {
    while (!predicate() && !closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, Math.max(1, deadline - Date.now()));
      });
    }
  };
  try {
    for (const request of requests) {
      if (closed) break;
      socket.write(request);
      const head =
        (typeof request === "string" ? request.slice(0, 5) : request.toString("latin1", 0, 5)) === "HEAD ";
      await waitFor(() => parseAnswer(buffer, false, head) !== undefined);
      const parsed = parseAnswer(buffer, closed, head);
      if (!parsed) break;
      answers.push(parsed.answer);
      buffer = buffer.subarray(parsed.length);
      if (parsed.answer.headers.connection?.toLowerCase() === "close") {
        await waitFor(() => false);
        break;
      }
    }
  } finally {
    socket.destroy();
  }
  return { answers, closed };
}

/** One whole answer at the start of `data` (content-length or chunked), or undefined. */
function parseAnswer(
  data: Buffer,
  ended = false,
  head = false,
): { answer: RawAnswer; length: number } | undefined {
  const headEnd = data.indexOf("\r\n\r\n");
  if (headEnd < 0) return undefined;
  const [statusLine = "", ...lines] = data.subarray(0, headEnd).toString("latin1").split("\r\n");
  const status = Number(statusLine.split(" ")[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let offset = headEnd + 4;
  let body = "";
  if (head) {
    // An answer to HEAD has headers only, whatever length they announce.
  } else if (headers["transfer-encoding"]?.toLowerCase() === "chunked") {
    const chunks: Buffer[] = [];
    for (;;) {
      const lineEnd = data.indexOf("\r\n", offset);
      if (lineEnd < 0) return undefined;
      const size = Number.parseInt(data.subarray(offset, lineEnd).toString("latin1"), 16);
      if (data.length < lineEnd + 2 + size + 2) return undefined;
      chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
      offset = lineEnd + 2 + size + 2;
      if (size === 0) break;
    }
    body = Buffer.concat(chunks).toString("utf8");
  } else if (headers["content-length"] !== undefined) {
    const length = Number(headers["content-length"]);
    if (data.length < offset + length) return undefined;
    body = data.subarray(offset, offset + length).toString("utf8");
    offset += length;
  } else if (status === 204 || status === 304) {
    body = "";
  } else {
    if (!ended) return undefined;
    body = data.subarray(offset).toString("utf8");
    offset = data.length;
  }
  return { answer: { status, headers, body }, length: offset };
}

/** A GET with the given path and Host, keeping the connection open. */
export function rawGet(path: string, host = "127.0.0.1", extra = ""): string {
  return `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`;
}
