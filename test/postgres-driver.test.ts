import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * patches/postgres+3.4.9.patch (porsager/postgres#1208): a reserved connection
 * whose backend dies must fail its next queries, not throw from a timer and take
 * the process down, and must not go back to the pool as if it were open.
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 2 });
});
afterAll(() => t.drop());

describe("postgres.js on a connection the server terminated", () => {
  it("rejects later queries on the reserved connection with CONNECTION_CLOSED, and the pool recovers", async () => {
    const sql = pgClient(t.url, { max: 2, onnotice: () => {} });
    try {
      const reserved = await sql.reserve();
      const [{ pid }] = (await reserved`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
      await t.sql`SELECT pg_terminate_backend(${pid})`;
      // The backend is gone while the connection sits idle and reserved (the #1208 case).
      await new Promise((resolve) => setTimeout(resolve, 300));
      await expect(reserved`SELECT 1`).rejects.toMatchObject({ code: "CONNECTION_CLOSED" });
      // Unpatched, this write is an uncaught TypeError thrown from setImmediate: vitest reports an
      // unhandled error (the run fails); a real process dies.
      await expect(reserved`SELECT 1`).rejects.toMatchObject({ code: "CONNECTION_CLOSED" });
      reserved.release();
      // Released, it is not handed out as open: the pool reconnects and answers every query (the
      // killed backend's FATAL is not handed to the first query of the new connection).
      let answered = 0;
      for (let i = 0; i < 6; i++) {
        answered += await Promise.race([
          sql`SELECT 1 AS one`.then(
            () => 1,
            () => 0,
          ),
          new Promise<number>((resolve) => setTimeout(resolve, 2_000, 0)),
        ]);
      }
      expect(answered).toBe(6);
    } finally {
      await Promise.race([sql.end({ timeout: 1 }), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    }
  });

  it("never runs what is left of a transaction, or of a reservation, on its connection once that reconnected for the pool", async () => {
    // One connection: after its backend is terminated, the next pool query reconnects that very connection.
    const sql = pgClient(t.url, { max: 1, onnotice: () => {} });
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    await t.sql`CREATE TABLE half_done (n int)`;
    try {
      const transaction = sql.begin(async (tx) => {
        const [{ pid }] = (await tx`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
        await t.sql`SELECT pg_terminate_backend(${pid})`;
        await pause(300);
        await sql`SELECT 1`;
        // Unpatched, this ran on the reconnected connection outside any transaction, and committed.
        await tx`INSERT INTO half_done VALUES (1)`;
      });
      await expect(transaction).rejects.toMatchObject({ code: "CONNECTION_CLOSED" });
      const [done] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM half_done`;
      expect(done?.n).toBe(0);

      const reserved = await sql.reserve();
      const [{ pid }] = (await reserved`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
      await t.sql`SELECT pg_terminate_backend(${pid})`;
      await pause(300);
      const pooled = sql`SELECT 1`;
      // Unpatched: UNSAFE_TRANSACTION, a BEGIN run on the pool's shared connection (the chaos run's 500).
      await expect(reserved`BEGIN`).rejects.toMatchObject({ code: "CONNECTION_CLOSED" });
      await pooled;
      reserved.release();
      // And the pool's connection is in no transaction left open: two statements, two transactions.
      const [first] = (await sql`SELECT txid_current()::text AS x`) as unknown as [{ x: string }];
      const [second] = (await sql`SELECT txid_current()::text AS x`) as unknown as [{ x: string }];
      expect(second.x).not.toBe(first.x);
    } finally {
      await Promise.race([sql.end({ timeout: 1 }), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    }
  });

  it("hands a reserve() waiting for a connection a working one after the reservation before it lost its own", async () => {
    // One connection, reserved; a second reserve() waits for it. The first reservation's backend is
    // terminated and the pool starts reconnecting that connection for the waiter. Unpatched, the first
    // reservation's release() handed the waiter the connection while it was still reconnecting: the
    // waiter's BEGIN was lost with the old socket, and its next statement ran on the new one outside any
    // transaction, where it committed on its own (a one-transaction idempotency claim left PROCESSING).
    const sql = pgClient(t.url, { max: 1, onnotice: () => {} });
    await t.sql`CREATE TABLE reserved_after_loss (n int)`;
    try {
      for (let round = 0; round < 5; round++) {
        const first = await sql.reserve();
        const [{ pid }] = (await first`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
        const waiting = sql.reserve();
        await t.sql`SELECT pg_terminate_backend(${pid})`;
        // The client has seen the close, and the pool is reconnecting the connection for the waiter.
        await new Promise((resolve) => setTimeout(resolve, 100));
        await expect(first`SELECT 1`).rejects.toMatchObject({ code: "CONNECTION_CLOSED" });
        first.release();
        const second = await waiting;
        const sent = await Promise.race([
          Promise.allSettled([
            second`BEGIN`.execute(),
            second`INSERT INTO reserved_after_loss VALUES (${round})`.execute(),
            second`ROLLBACK`.execute(),
          ]).then((all) => all.map((s) => s.status)),
          // Unpatched, the waiter's statements never answered here (or ran outside its transaction).
          new Promise((resolve) => setTimeout(resolve, 5_000, "no answer in 5 s")),
        ]);
        expect(sent).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
        second.release();
        const [left] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM reserved_after_loss`;
        expect(left?.n).toBe(0);
      }
    } finally {
      await Promise.race([sql.end({ timeout: 1 }), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    }
  });

  it("fails a query in flight, and those queued behind it, when the server terminates the backend", async () => {
    const sql = pgClient(t.url, { max: 1, onnotice: () => {} });
    try {
      const reserved = await sql.reserve();
      const [{ pid }] = (await reserved`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
      const sleeping = reserved`SELECT pg_sleep(10)`.then(
        () => "answered",
        (error: { code?: string }) => error.code,
      );
      const queued = reserved`SELECT 1`.then(
        () => "answered",
        (error: { code?: string }) => error.code,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      await t.sql`SELECT pg_terminate_backend(${pid})`;
      // The server sends a FATAL and closes the socket, with no socket error: before the patch's
      // fix, both promises waited forever (and so did a transaction's ROLLBACK on that connection).
      const timedOut = new Promise((resolve) => setTimeout(resolve, 3_000, "still waiting"));
      expect(await Promise.race([sleeping, timedOut])).toBe("57P01");
      expect(await Promise.race([queued, timedOut])).toBe("CONNECTION_CLOSED");
      reserved.release();
      // The reconnected connection answers each query with its own rows: nothing of the dead one's
      // queue is left to take a new query's answer (how a claim once read another statement's row).
      const answers = await Promise.all(
        Array.from({ length: 5 }, (_, i) => sql`SELECT ${i}::int AS i`.then((rows) => rows[0]?.i)),
      );
      expect(answers).toEqual([0, 1, 2, 3, 4]);
    } finally {
      await Promise.race([sql.end({ timeout: 1 }), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    }
  });

  it("ends a session a client left idle inside a transaction, so its row locks do not hold everyone up", async () => {
    const db = createDb(t.url, { max: 2, idleInTransactionTimeoutMs: 300 });
    try {
      const held = await db.$client.reserve();
      await held`BEGIN`;
      await held`SELECT * FROM sku WHERE id = 'SKU-MUG' FOR UPDATE`;
      // The client "forgets" this transaction. Another request wants the same row:
      const started = Date.now();
      await t.sql`UPDATE sku SET name = name WHERE id = 'SKU-MUG'`;
      expect(Date.now() - started).toBeLessThan(5_000);
      held.release();
    } finally {
      await closeDb(db);
    }
  });
});
