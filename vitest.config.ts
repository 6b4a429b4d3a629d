import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** The longest file first (the model checker's), so that the others run beside it rather than after it. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]) {
    const sorted = await super.sort(files);
    const longest = (f: TestSpecification) => f.moduleId.endsWith("/test/model.test.ts");
    return [...sorted.filter(longest), ...sorted.filter((f) => !longest(f))];
  }
}

export default defineConfig({
  resolve: {
    alias: [
      { find: /^~\//, replacement: `${fileURLToPath(new URL("./src", import.meta.url))}/` },
      // The core, a package of its own (packages/idempotency), by its name, from its source (tsconfig.json's
      // paths say the same): its entry, and its framework adapters.
      {
        find: /^@exactly-once\/idempotency$/,
        replacement: fileURLToPath(new URL("./packages/idempotency/src/index.ts", import.meta.url)),
      },
      {
        find: /^@exactly-once\/idempotency\/(\w+)$/,
        replacement: `${fileURLToPath(new URL("./packages/idempotency/src/adapters", import.meta.url))}/$1.ts`,
      },
    ],
  },
  test: {
    // e2e/*.spec.ts belong to Playwright.
    include: ["src/**/*.test.ts", "test/**/*.test.ts", "packages/*/src/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two files at once on the embedded server (started with max_connections=400), one on a server of the
    // machine's (DATABASE_URL), whose connection limit is its own (PostgreSQL's default is 100). The model
    // checker's file is one long CPU-bound run: beside it, the others take the second worker.
    maxWorkers: process.env.DATABASE_URL ? 1 : 2,
    sequence: { sequencer: LongestFirst },
  },
});
