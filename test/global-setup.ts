import type { TestProject } from "vitest/node";
import { getEnv } from "~/env";
import { createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { ensureBuild } from "../scripts/lib/build";
import { startThrowawayPostgres } from "../scripts/lib/embedded-postgres";
import { keepExitCodeOnNaturalEnd } from "../scripts/lib/exit";
import { databaseUrl, uniqueName } from "./support/names";

// embedded-postgres would otherwise end this process with 0 whatever failed (scripts/lib/exit.ts).
keepExitCodeOnNaturalEnd();

declare module "vitest" {
  export interface ProvidedContext {
    /** A connection string to the server's maintenance database. */
    pgAdminUrl: string;
    /** A migrated, seeded database that every test file clones. */
    templateDatabase: string;
  }
}

/**
 * One PostgreSQL for the whole run: the server in DATABASE_URL if set, else an
 * embedded one in a temporary folder on a free port. Every test file clones its
 * own database from a migrated template, so files run in parallel.
 */
export default async function setup(project: TestProject) {
  const env = getEnv();
  const cleanups: Array<() => Promise<void>> = [];
  let adminUrl = env.DATABASE_URL;
  if (!adminUrl) {
    const server = await startThrowawayPostgres("checkout-test-pg", [
      "-c",
      "max_connections=400",
      "-c",
      "fsync=off",
    ]);
    adminUrl = server.adminUrl;
    cleanups.push(server.stop);
  }

  const template = uniqueName("checkout_tpl");
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${template}`);
  const templateUrl = databaseUrl(adminUrl, template);
  await runMigrations(templateUrl);
  const db = createDb(templateUrl, { max: 1 });
  await seedCatalogue(db);
  await db.$client.end();

  // HTTP tests run the real production build.
  await ensureBuild((message) => console.log(`[test setup] ${message}`));

  project.provide("pgAdminUrl", adminUrl);
  project.provide("templateDatabase", template);

  return async () => {
    const leftovers = await admin<{ datname: string }[]>`
      SELECT datname FROM pg_database WHERE datname LIKE ${`${template}_%`}`;
    for (const { datname } of leftovers) {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
    }
    await admin.unsafe(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await admin.end();
    for (const cleanup of cleanups) await cleanup();
  };
}
