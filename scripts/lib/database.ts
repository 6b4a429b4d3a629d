import type { Env } from "~/env";
import { closeDb, createDb } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { ensureDatabase, startEmbeddedPostgres } from "./embedded-postgres";

export interface PreparedDatabase {
  url: string;
  stop: () => Promise<void>;
}

/**
 * The database the app will use, migrated and seeded: DATABASE_URL when set,
 * otherwise an embedded PostgreSQL whose data stays in DATA_DIR.
 */
export async function prepareDatabase(
  env: Env,
  log: (message: string) => void,
  /** A throwaway embedded server (`npm start -- --fresh`, the end-to-end tests): it goes down with its launcher's process group. */
  { throwaway = false }: { throwaway?: boolean } = {},
): Promise<PreparedDatabase> {
  let url = env.DATABASE_URL;
  let stop = async () => {};
  if (!url) {
    const server = await startEmbeddedPostgres({
      dataDir: env.DATA_DIR,
      port: env.EMBEDDED_PG_PORT,
      ownSession: !throwaway,
      log: (message) => {
        if (env.LOG_LEVEL === "debug" || env.LOG_LEVEL === "trace") log(message);
      },
    });
    await ensureDatabase(server.url(), "checkout");
    url = server.url("checkout");
    stop = server.stop;
    log(
      `embedded PostgreSQL ${server.reused ? "reused" : "started"} on 127.0.0.1:${env.EMBEDDED_PG_PORT} (data in ${env.DATA_DIR})`,
    );
  }
  try {
    await runMigrations(url);
    const db = createDb(url, { max: 1 });
    try {
      const inserted = await seedCatalogue(db);
      log(`migrations applied; catalogue seeded (${inserted} new products)`);
    } finally {
      await closeDb(db);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, stop };
}
