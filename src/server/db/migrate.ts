import { fileURLToPath } from "node:url";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { Logger, runMigrations as runQueueMigrations } from "graphile-worker";
import { pgClient } from "./client";

const quietLogger = new Logger(() => () => {});

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../../drizzle", import.meta.url));

/** Any constant works; it only has to be the same for every instance of this app. */
const MIGRATION_LOCK_KEY = 7_284_110_001;

/**
 * Applies the committed drizzle-kit migrations over one connection. Several app
 * instances may start at the same moment: a session advisory lock makes them take
 * turns, and the later ones find nothing left to apply.
 */
export async function runMigrations(url: string): Promise<void> {
  const client = pgClient(url, { max: 1, onnotice: () => {} });
  try {
    await client`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    try {
      await migrate(drizzle({ client, casing: "snake_case" }), {
        migrationsFolder: MIGRATIONS_FOLDER,
      });
      // The job queue's own schema (graphile_worker), versioned by the library.
      await runQueueMigrations({ connectionString: url, logger: quietLogger });
    } finally {
      await client`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
    }
  } finally {
    await client.end({ timeout: 5 });
  }
}
