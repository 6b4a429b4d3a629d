import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDb, createDb, pgClient } from "../src/server/db/client";
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
      // Released, it is not handed out as open: the pool reconnects and answers (a stale FATAL
      // from the killed backend may fail one query once, which callers see as a transient error).
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
      expect(answered).toBeGreaterThanOrEqual(5);
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
