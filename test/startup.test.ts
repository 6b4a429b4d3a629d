import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { CATALOGUE, seedCatalogue } from "~/server/db/seed";
import { databaseUrl, uniqueName } from "./support/names";

/** Several instances starting at the same moment against one empty database. */
let admin: postgres.Sql;
let name: string;
let url: string;

beforeAll(async () => {
  admin = pgClient(inject("pgAdminUrl"), { max: 1, onnotice: () => {} });
  name = `${inject("templateDatabase")}_empty_${uniqueName("x").slice(-8)}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  url = databaseUrl(inject("pgAdminUrl"), name);
});
afterAll(async () => {
  await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
});

describe("start-up", () => {
  it("migrates and seeds once when four instances start together, and again without effect", async () => {
    const startInstance = async () => {
      await runMigrations(url);
      const db = createDb(url, { max: 1 });
      try {
        return await seedCatalogue(db);
      } finally {
        await closeDb(db);
      }
    };
    const inserted = await Promise.all([startInstance(), startInstance(), startInstance(), startInstance()]);
    expect(inserted.reduce((a, b) => a + b, 0)).toBe(CATALOGUE.length);
    expect(await startInstance()).toBe(0);

    const check = pgClient(url, { max: 1, onnotice: () => {} });
    try {
      const [skus] = await check`SELECT count(*)::int AS n FROM sku`;
      const [applied] = await check`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`;
      expect(skus?.n).toBe(CATALOGUE.length);
      expect(applied?.n).toBeGreaterThanOrEqual(1);
    } finally {
      await check.end();
    }
  });
});
