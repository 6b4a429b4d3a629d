import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { pgClient } from "~/server/db/client";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { type PgProxy, startPgProxy } from "./support/pg-proxy";

/**
 * patches/postgres+3.4.9.patch, the connection start-up part (porsager/postgres#1192,
 * #1223): a new connection whose backend is terminated while postgres.js fetches
 * the array types (the first thing it does on every connection) must neither kill
 * the process with an unhandled rejection nor hand the dead backend's error to
 * the next query, and a reserve() that lost its connection must not leak the next one.
 * This is what a database connection drop during an app's restart looks like.
 */
const TYPES_QUERY = "pg_catalog.pg_type";

let t: TestDatabase;
let proxy: PgProxy;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 1 });
  process.on("unhandledRejection", onUnhandled);
});
afterAll(async () => {
  process.off("unhandledRejection", onUnhandled);
  await t.drop();
});
beforeEach(async () => {
  unhandled.length = 0;
  proxy = await startPgProxy(t.url);
});
afterEach(() => proxy.close());

function client(max: number) {
  return pgClient(proxy.url, { max, onnotice: () => {}, connect_timeout: 5 });
}

async function end(sql: ReturnType<typeof client>) {
  await Promise.race([sql.end({ timeout: 1 }), new Promise((resolve) => setTimeout(resolve, 2_000))]);
}

/** Lets late timers and rejections surface before looking for them. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 200));

describe("postgres.js when the server terminates a connection while it starts", () => {
  it("runs the query that opened the connection on the reconnected one", async () => {
    const sql = client(1);
    try {
      proxy.killOn(TYPES_QUERY);
      const rows = await sql`SELECT 41 + 1 AS answer`;
      expect(proxy.killed).toBe(1);
      expect(rows).toEqual([{ answer: 42 }]);
      const [row] = await sql`SELECT pg_backend_pid() AS pid`;
      expect(row?.pid).toEqual(expect.any(Number));
      await settle();
      expect(unhandled).toEqual([]);
    } finally {
      await end(sql);
    }
  });

  it("gives reserve() a working connection, and leaks none when it loses one", async () => {
    const sql = client(1);
    try {
      proxy.killOn(TYPES_QUERY);
      const reserved = await Promise.race([
        sql.reserve().catch((error: unknown) => error),
        new Promise((resolve) => setTimeout(resolve, 8_000, "timed out")),
      ]);
      expect(proxy.killed).toBe(1);
      await settle();
      expect(unhandled).toEqual([]);
      if (reserved instanceof Error || reserved === "timed out") {
        // Failing the reserve is acceptable (the caller sees a connection error); losing the pool's
        // only connection is not: the next query must still get one.
        expect(reserved).toMatchObject({ code: expect.stringMatching(/CONNECTION|57P01/) });
      } else {
        const held = reserved as Awaited<ReturnType<typeof sql.reserve>>;
        expect(await held`SELECT 1 AS one`).toEqual([{ one: 1 }]);
        held.release();
      }
      const answer = await Promise.race([
        sql`SELECT 2 AS two`.then((rows) => rows[0]),
        new Promise((resolve) => setTimeout(resolve, 8_000, "timed out")),
      ]);
      expect(answer).toEqual({ two: 2 });
    } finally {
      await end(sql);
    }
  });

  it("survives a storm: every new connection killed at start, several times over, under concurrent queries", async () => {
    const sql = client(4);
    try {
      proxy.killOn(TYPES_QUERY, 6);
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) => sql`SELECT ${i}::int AS i`.then((rows) => rows[0]?.i)),
      );
      await settle();
      expect(unhandled).toEqual([]);
      for (const [i, result] of results.entries()) {
        // A query may fail with a connection error (its connection died under it); none gets another's answer.
        if (result.status === "fulfilled") expect(result.value).toBe(i);
        else expect(result.reason).toMatchObject({ code: expect.stringMatching(/CONNECTION|57P01/) });
      }
      const after = await sql`SELECT 7 AS seven`;
      expect(after).toEqual([{ seven: 7 }]);
    } finally {
      await end(sql);
    }
  });
});

describe("postgres.js when a row arrives that no query asked for", () => {
  // Seen in a chaos run after dropped connections: a DataRow read against a query whose statement had
  // no columns threw a TypeError from the socket handler, which reached the shopper as a 500.
  it("fails the query with CONNECTION_CLOSED (retryable), drops the out-of-step socket, and the next query is right", async () => {
    const sql = client(1);
    try {
      await sql`SELECT 1 AS warm`;
      proxy.strayRowOn("stray_marker");
      const failed = await sql`SELECT ${5}::int AS stray_marker`.then(
        (rows) => ({ rows }),
        (error: unknown) => ({ error }),
      );
      expect(failed).toMatchObject({ error: { code: "CONNECTION_CLOSED" } });
      const results = await Promise.all(
        [1, 2, 3].map((i) => sql`SELECT ${i}::int AS i`.then((rows) => rows[0]?.i)),
      );
      expect(results).toEqual([1, 2, 3]);
      await settle();
      expect(unhandled).toEqual([]);
    } finally {
      await end(sql);
    }
  });
});
