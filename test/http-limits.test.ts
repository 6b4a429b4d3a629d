import { readFileSync } from "node:fs";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppServer, HttpShopper, startAppServer } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * What a client that sends a large Content-Length and stalls costs the production server (issue 29): the
 * body is refused from its declared length before a byte is kept, the request must arrive within seconds,
 * and one address may hold only so many connections. 200 of them at once leave its memory flat and the shop
 * answering everyone else.
 */
let database: TestDatabase;
let server: AppServer;
let port: number;
const PER_ADDRESS = 50;
const REQUEST_TIMEOUT_MS = 3_000;

beforeAll(async () => {
  database = await createTestDatabase({ poolSize: 2 });
  server = await startAppServer({
    databaseUrl: database.url,
    env: {
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS),
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      HTTP_HEADERS_TIMEOUT_MS: "2000",
    },
  });
  port = Number(new URL(server.baseUrl).port);
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await database?.drop();
});

const rssMb = () =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

interface Stalled {
  /** The status line the server answered, if any. */
  status: () => string | undefined;
  closedAfterMs: () => number | undefined;
  socket: net.Socket;
}

/** A client on `from` that sends the request's head and the first byte of its body, then nothing. */
function stall(from: string, head: string): Promise<Stalled> {
  return new Promise((resolve) => {
    const opened = Date.now();
    let answer = "";
    let closedAt: number | undefined;
    const socket = net.connect({ host: "127.0.0.1", port, localAddress: from }, () => {
      socket.write(head);
      resolve({
        status: () => answer.split("\r\n", 1)[0] || undefined,
        closedAfterMs: () => (closedAt === undefined ? undefined : closedAt - opened),
        socket,
      });
    });
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      closedAt = Date.now();
    });
  });
}

const notify = (length: number) =>
  `POST /api/payments/notify HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n{`;

describe("stalled bodies", () => {
  it("200 clients declaring a 1 MiB notification and stalling: refused from the length, memory flat, 429 past the address's share, the shop still answers, all closed within the timeout", async () => {
    const before = rssMb();
    const stalled: Stalled[] = [];
    for (let i = 0; i < 200; i++) stalled.push(await stall("127.0.0.2", notify(1024 * 1024)));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const statuses = stalled.map((s) => s.status() ?? "no answer");
    // Past its share the address is refused at once; the rest are refused from the declared length (413).
    expect(statuses.filter((s) => s.includes(" 429 "))).toHaveLength(200 - PER_ADDRESS);
    expect(statuses.filter((s) => s.includes(" 413 "))).toHaveLength(PER_ADDRESS);
    // Everyone else is served meanwhile.
    expect((await new HttpShopper(server.baseUrl).query("catalog.list")).status).toBe(200);
    expect(rssMb() - before).toBeLessThan(20);
    // The stalled ones are closed once the request timeout passes (Node checks every second).
    await expect
      .poll(() => stalled.filter((s) => s.closedAfterMs() === undefined).length, {
        timeout: REQUEST_TIMEOUT_MS + 5_000,
        interval: 250,
      })
      .toBe(0);
    expect(Math.max(...stalled.map((s) => s.closedAfterMs() ?? Number.POSITIVE_INFINITY))).toBeLessThan(
      REQUEST_TIMEOUT_MS + 4_000,
    );
  });

  it("a body within its limit that stalls is cut off by the request timeout, and nothing was written", async () => {
    const [before] = await database.sql`SELECT count(*)::int AS n FROM payment_notification`;
    const client = await stall("127.0.0.3", notify(1_000));
    await expect
      .poll(() => client.closedAfterMs(), { timeout: REQUEST_TIMEOUT_MS + 5_000, interval: 100 })
      .toBeDefined();
    expect(client.status() ?? "closed without an answer").not.toMatch(/ 2\d\d /);
    const [after] = await database.sql`SELECT count(*)::int AS n FROM payment_notification`;
    expect(after?.n).toBe(before?.n);
  });

  it("a chunked body that runs past its route's limit is refused and its connection closed", async () => {
    const client = await stall(
      "127.0.0.4",
      `POST /api/v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
    );
    const chunk = "x".repeat(8 * 1024);
    for (let i = 0; i < 4 && client.closedAfterMs() === undefined; i++) {
      client.socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await expect.poll(() => client.closedAfterMs(), { timeout: 5_000, interval: 50 }).toBeDefined();
    expect(client.status()).toMatch(/ 413 /);
  });
});

describe("a body too large to drain (5 MB), sent whole before the answer is read", () => {
  const fiveMb = "x".repeat(5 * 1024 * 1024);
  it.each([
    ["/api/v1/orders", { "content-type": "application/json", "idempotency-key": "k-too-large" }],
    ["/api/payments/notify", { "content-type": "application/json" }],
    ["/api/trpc/orders.create", { "content-type": "application/json" }],
  ])(
    "%s: Node's fetch gets the 413 (the server reads and drops the rest before it closes)",
    async (path, headers) => {
      const response = await fetch(`${server.baseUrl}${path}`, { method: "POST", headers, body: fiveMb });
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({ status: 413 });
    },
  );

  it("60 clients declaring 5 MB and stalling: each answered 413, the lingering close ends within its bound, memory flat", async () => {
    const before = rssMb();
    const clients: Stalled[] = [];
    for (let i = 0; i < 60; i++)
      clients.push(
        await stall(
          "127.0.0.6",
          `POST /api/v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${5 * 1024 * 1024}\r\n\r\n{`,
        ),
      );
    await expect
      .poll(() => clients.filter((c) => c.closedAfterMs() === undefined).length, {
        timeout: 10_000,
        interval: 100,
      })
      .toBe(0);
    expect(clients.map((c) => c.status())).toEqual(clients.map(() => expect.stringMatching(/ 413 /)));
    // Closed by the linger's deadline (2 s), or by the request timeout (3 s) if it comes first.
    expect(Math.max(...clients.map((c) => c.closedAfterMs() ?? 0))).toBeLessThan(REQUEST_TIMEOUT_MS + 2_000);
    expect(rssMb() - before).toBeLessThan(40);
  });

  it("a raw client that writes its whole body first, then reads: the 413, then the close", async () => {
    const socket = net.connect({ host: "127.0.0.1", port, localAddress: "127.0.0.5" });
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
    });
    const closed = new Promise<string>((resolve) => {
      socket.on("error", (error) => resolve(`error ${(error as NodeJS.ErrnoException).code}`));
      socket.on("close", () => resolve("closed"));
    });
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(
      `POST /api/v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${fiveMb.length}\r\n\r\n`,
    );
    await new Promise<void>((resolve) => socket.write(fiveMb, () => resolve()));
    socket.end();
    expect(await closed).toBe("closed");
    expect(answer.split("\r\n", 1)[0]).toMatch(/ 413 /);
  });
});

describe("the server's memory", () => {
  it("runs with two malloc arenas (glibc's default of 8 per core held about 30 MB more at the bench's peak)", () => {
    const environ = readFileSync(`/proc/${server.pid}/environ`, "utf8").split("\0");
    expect(environ).toContain("MALLOC_ARENA_MAX=2");
  });
});
