import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The import boundaries are Biome rules (biome.json, noRestrictedImports). Each is planted here: a file
 * that crosses it, linted with the project's own configuration in a scratch folder, must be refused with
 * the rule's message; a file that keeps to it must pass.
 */
function lint(files: Record<string, string>): string[] {
  const dir = mkdtempSync(path.join(tmpdir(), "boundaries-"));
  try {
    const config = JSON.parse(readFileSync("biome.json", "utf8"));
    delete config.$schema;
    config.vcs = { enabled: false };
    writeFileSync(path.join(dir, "biome.json"), JSON.stringify(config));
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), text);
    }
    const run = spawnSync(path.resolve("node_modules/.bin/biome"), ["lint", "--max-diagnostics=50", "."], {
      cwd: dir,
      encoding: "utf8",
    });
    const output = `${run.stdout}${run.stderr}`;
    return [...output.matchAll(/× (.+)/g)]
      .map((m) => m[1] ?? "")
      .filter((message) => !message.startsWith("Some errors were emitted"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("import boundaries, held by the linter", () => {
  it("the idempotency core imports nothing from the app, no framework and no ORM", () => {
    expect(
      lint({
        "src/idempotency/a.ts":
          'import { DomainError } from "~/server/errors";\nexport const a = DomainError;\n',
        "src/idempotency/b.ts": 'import { sql } from "drizzle-orm";\nexport const b = sql;\n',
        "src/idempotency/c.ts":
          'import { isTransientError } from "~/shared/postgres-driver";\nexport const c = isTransientError;\n',
      }),
    ).toEqual([
      expect.stringContaining("The idempotency core imports nothing from the app"),
      expect.stringContaining("The idempotency core speaks to PostgreSQL through postgres.js alone"),
      expect.stringContaining("The idempotency core imports nothing from the app"),
    ]);
    expect(
      lint({
        "src/idempotency/ok.ts":
          'import type postgres from "postgres";\nimport { a } from "./a";\nexport type S = postgres.Sql;\nexport const ok = a;\n',
        "src/idempotency/a.ts": "export const a = 1;\n",
      }),
    ).toEqual([]);
  });
});
