import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import type postgres from "postgres";
import { inject } from "vitest";
import { pgClient } from "~/server/db/client";
import { MIGRATIONS_FOLDER } from "~/server/db/migrate";
import { databaseUrl, uniqueName } from "./names";

export interface DatabaseBefore {
  url: string;
  sql: postgres.Sql;
  /** Applies every migration from there on, as an upgrade would. */
  migrateToLatest(): Promise<void>;
  drop(): Promise<void>;
}

/**
 * A new database migrated up to (not including) migration number `before`: the same files, the journal cut.
 * A migration's test fills it in the shape before, then upgrades it.
 */
export async function databaseBefore(before: number, prefix: string): Promise<DatabaseBefore> {
  const name = uniqueName(prefix);
  const url = databaseUrl(inject("pgAdminUrl"), name);
  const admin = pgClient(inject("pgAdminUrl"), { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const folder = mkdtempSync(path.join(tmpdir(), "checkout-migrations-"));
  cpSync(MIGRATIONS_FOLDER, folder, { recursive: true });
  const journalPath = path.join(folder, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { idx: number }[] };
  if (journal.entries.length <= before) throw new Error(`there is no migration ${before}`);
  journal.entries = journal.entries.filter((entry) => entry.idx < before);
  writeFileSync(journalPath, JSON.stringify(journal));
  const migrateWith = async (migrationsFolder: string) => {
    const client = pgClient(url, { max: 1, onnotice: () => {} });
    try {
      await migrate(drizzle({ client, casing: "snake_case" }), { migrationsFolder });
    } finally {
      await client.end();
    }
  };
  await migrateWith(folder);
  const sql = pgClient(url, { max: 1, onnotice: () => {} });
  return {
    url,
    sql,
    migrateToLatest: () => migrateWith(MIGRATIONS_FOLDER),
    async drop() {
      await sql.end();
      rmSync(folder, { recursive: true, force: true });
      const dropper = pgClient(inject("pgAdminUrl"), { max: 1, onnotice: () => {} });
      await dropper.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropper.end();
    },
  };
}
