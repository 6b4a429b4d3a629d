import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { holdConnection } from "~/server/db/client";
import { sku } from "~/server/db/schema";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * A held connection's drizzle transaction (src/shared/postgres-driver.ts) is made without building a
 * relational query builder per table: those are made when first asked for. It must still be the whole
 * transaction object: builders and relational queries, on its own connection.
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 2 });
});
afterAll(() => t.drop());

describe("a held connection's transaction", () => {
  it("has every relational query of the schema, made when first asked for, on its own connection", async () => {
    const held = await holdConnection(t.db);
    try {
      await held.sql`BEGIN`;
      await held.sql`UPDATE sku SET name = 'held' WHERE id = 'SKU-MUG'`;
      // Seen inside the transaction (its connection), through a builder and a relational query alike.
      const [built] = await held.tx.select({ name: sku.name }).from(sku).where(sql`id = 'SKU-MUG'`);
      expect(built?.name).toBe("held");
      expect(Object.keys(held.tx.query).sort()).toEqual(Object.keys(t.db.query).sort());
      const found = await held.tx.query.sku.findFirst({ where: (s, { eq }) => eq(s.id, "SKU-MUG") });
      expect(found?.name).toBe("held");
      await held.sql`ROLLBACK`;
      await held.close({ ended: true });
    } catch (error) {
      await held.close();
      throw error;
    }
    // Outside it, nothing happened.
    const [outside] = await t.sql<{ name: string }[]>`SELECT name FROM sku WHERE id = 'SKU-MUG'`;
    expect(outside?.name).not.toBe("held");
  });
});
