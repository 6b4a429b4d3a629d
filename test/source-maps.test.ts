import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAppServer } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * With Node's source maps on, Node keeps the map of every module it loads: Next's runtime and chunks and every
 * package's, with their sources. That was 53 MB of a production instance's memory at start
 * (179 MB with them off, 232 on). The production server keeps none unless SOURCE_MAPS asks
 * (docs/configuration.md).
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.drop());

async function serverState(env: Record<string, string>) {
  const report = path.join(tmpdir(), `source-maps-${process.pid}-${Date.now()}.json`);
  const server = await startAppServer({
    databaseUrl: t.url,
    nodeArgs: ["--import", pathToFileURL(path.resolve("test/support/probes/source-maps.mjs")).href],
    env: { SOURCE_MAPS_REPORT: report, ...env },
  });
  try {
    // A page: Next loads its page runtime now.
    expect((await fetch(`${server.baseUrl}/`)).status).toBe(200);
    rmSync(report, { force: true });
    for (let i = 0; i < 50 && !existsSync(report); i++) await new Promise((r) => setTimeout(r, 100));
    return JSON.parse(readFileSync(report, "utf8")) as {
      enabled: boolean;
      serverMap: boolean;
      pageRuntimeMap: boolean;
    };
  } finally {
    await server.stop();
    rmSync(report, { force: true });
  }
}

describe("source maps in the production server", () => {
  it("are off by default: no module loaded after start-up has its map kept", async () => {
    expect(await serverState({})).toEqual({ enabled: false, serverMap: false, pageRuntimeMap: false });
  });

  it("SOURCE_MAPS=true keeps them, for stack traces in the TypeScript's lines", async () => {
    expect(await serverState({ SOURCE_MAPS: "true" })).toEqual({
      enabled: true,
      serverMap: true,
      pageRuntimeMap: true,
    });
  });
});
