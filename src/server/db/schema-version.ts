import { readFileSync } from "node:fs";
import path from "node:path";
import type postgres from "postgres";
import { MIGRATIONS_FOLDER } from "./migrate";

/** The last migration this code was built with (drizzle/meta/_journal.json), by its tag and time. */
export function latestMigration(folder = MIGRATIONS_FOLDER): { tag: string; when: number } {
  const journal = JSON.parse(readFileSync(path.join(folder, "meta", "_journal.json"), "utf8")) as {
    entries: { tag: string; when: number }[];
  };
  const last = journal.entries.at(-1);
  if (!last) throw new Error(`no migration in ${folder}`);
  return last;
}

/**
 * Why the database's schema is not the one this code needs (undefined: it is): drizzle's migrator keeps
 * each migration it applied with the time of its journal entry, and applies those later than the last kept.
 */
export async function schemaBehind(sql: postgres.Sql): Promise<string | undefined> {
  const latest = latestMigration();
  const [table] = await sql<{ present: boolean }[]>`
    SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS present`;
  const [row] = table?.present
    ? await sql<
        { applied: string | null }[]
      >`SELECT max(created_at)::text AS applied FROM drizzle.__drizzle_migrations`
    : [{ applied: null }];
  if (!row || row.applied === null) {
    return `the database has no schema yet: run npm run db:migrate (the code needs ${latest.tag})`;
  }
  if (Number(row.applied) < latest.when) {
    return `the database's schema is behind the code (it needs ${latest.tag}): run npm run db:migrate`;
  }
  return undefined;
}
