import { test as base } from "vitest";
import { testAppContext } from "./app-context";
import { createTestDatabase } from "./database";
import { startLoopbackApp } from "./loopback-app";

/**
 * The set-up most integration test files share, as vitest fixtures scoped to the file:
 * a fresh database cloned from the migrated template (`database`), and the app's
 * dependencies wired to it, with merchant and MockPay talking over loopback HTTP
 * (`app`, and MockPay's `mockPay`). A test asks for what it uses: `test("…", async ({ app, database }) => …)`.
 */
export const test = base
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads which fixtures a fixture needs from this pattern
  .extend("database", { scope: "file" }, async ({}, { onCleanup }) => {
    const database = await createTestDatabase({ poolSize: 30 });
    onCleanup(() => database.drop());
    return database;
  })
  .extend("loopback", { scope: "file" }, async ({ database }, { onCleanup }) => {
    const loopback = await startLoopbackApp(testAppContext(database.db));
    onCleanup(() => loopback.close());
    return loopback;
  })
  .extend("app", { scope: "file" }, async ({ loopback }) => loopback.app)
  .extend("mockPay", { scope: "file" }, async ({ loopback }) => loopback.mockPay);

export { describe, expect } from "vitest";
