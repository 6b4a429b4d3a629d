import { createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { settledCount } from "./settle";

/**
 * The peer's own database beside the bench's (same server): the same schema and catalogue, stock for any run,
 * counted and dropped by the bench.
 */
export const peerDatabase = (benchUrl: string) => sideDatabase(benchUrl, "peer");

/** A database beside the bench's, named `<bench's>_<suffix>`: migrated, the catalogue seeded, stock for any run. */
export async function sideDatabase(benchUrl: string, suffix: string) {
  const admin = pgClient(benchUrl, { max: 1, onnotice: () => {} });
  const name = `${new URL(benchUrl).pathname.slice(1)}_${suffix}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const target = new URL(benchUrl);
  target.pathname = `/${name}`;
  const url = target.toString();
  await runMigrations(url);
  const db = createDb(url, { max: 2 });
  await seedCatalogue(db);
  await db.$client`UPDATE sku SET stock = 100000000, initial_stock = 100000000`;
  const sql = db.$client;
  const count = async (query: string) => Number((await sql.unsafe(query))[0]?.n ?? 0);
  let dropped = false;
  return {
    url,
    db,
    sql,
    count,
    settled: settledCount(count),
    /** Drops it (once: a scenario that drops its own at its end leaves the bench's cleanup nothing to do). */
    drop: async () => {
      if (dropped) return;
      dropped = true;
      await sql.end({ timeout: 2 });
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}
