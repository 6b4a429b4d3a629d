import { randomBytes } from "node:crypto";
import type postgres from "postgres";
import { inject } from "vitest";
import { closeDb, createDb, type Db, pgClient } from "~/server/db/client";
import { databaseUrl } from "./names";

export interface TestDatabase {
  url: string;
  /** A pool of its own: concurrent calls really run on separate connections. */
  db: Db;
  /** Raw SQL for counting rows and arranging states. */
  sql: postgres.Sql;
  drop(): Promise<void>;
}

/** A fresh database for one test file, cloned from the migrated, seeded template. */
export async function createTestDatabase(options: { poolSize?: number } = {}): Promise<TestDatabase> {
  const adminUrl = inject("pgAdminUrl");
  const template = inject("templateDatabase");
  const name = `${template}_${randomBytes(4).toString("hex")}`;
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  try {
    // CREATE DATABASE … TEMPLATE fails while another clone of the same template is being made.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${template}`);
        break;
      } catch (error) {
        if (attempt >= 20 || (error as { code?: string }).code !== "55006") throw error;
        await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  const url = databaseUrl(adminUrl, name);
  const db = createDb(url, { max: options.poolSize ?? 20 });
  const sql = pgClient(url, { max: 2, onnotice: () => {} });
  return {
    url,
    db,
    sql,
    async drop() {
      await closeDb(db);
      await sql.end();
      const dropper = pgClient(adminUrl, { max: 1, onnotice: () => {} });
      await dropper.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropper.end();
    },
  };
}
