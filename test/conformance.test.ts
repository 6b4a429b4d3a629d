import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Profile, runConformance, type Scenario } from "../scripts/lib/conformance/run";
import { type AppServer, startAppServer } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The conformance kit (npm run conformance) against this app's REST API, the production server on a fresh
 * database, under its profile: every scenario of the draft the profile covers passes. The adapter examples
 * are held to it in test/adapter-examples.test.ts.
 */
const { scenarios } = JSON.parse(readFileSync("conformance/scenarios.json", "utf8")) as {
  scenarios: Scenario[];
};
const profile = JSON.parse(readFileSync("conformance/profiles/app.json", "utf8")) as Profile;
let t: TestDatabase;
let server: AppServer;

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 2 });
  server = await startAppServer({ databaseUrl: t.url });
});
afterAll(async () => {
  await server?.stop();
  await t?.drop();
});

describe("the conformance kit against this app's REST API", () => {
  it("passes every scenario, none left out under its profile", async () => {
    const verdicts = await runConformance(server.baseUrl, profile, scenarios);
    expect(verdicts.filter((verdict) => verdict.result !== "pass")).toEqual([]);
    expect(verdicts).toHaveLength(scenarios.length);
  });

  it("fails a scenario when the server answers otherwise (a path with no operation)", async () => {
    const verdicts = await runConformance(server.baseUrl, { ...profile, path: "/api/v1/nowhere" }, scenarios);
    expect(verdicts.find((verdict) => verdict.id === "replay-success")?.result).toBe("fail");
  });
});
