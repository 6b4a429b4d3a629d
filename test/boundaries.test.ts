import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
    const run = spawnSync(path.resolve("node_modules/.bin/biome"), ["lint", "--max-diagnostics=1000", "."], {
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

/**
 * The direction between the capabilities of src/server, from the ground up (docs/architecture.md): each may
 * import what stands on a lower floor, never what stands above it. Payments stands below orders: it knows an
 * order only by its reference (db/order-ref.ts), and cancelling an order closes its payments; refunds stand
 * above both, and payments hands refund facts to them through a port (payments/refunds-port.ts).
 */
const FLOORS = [
  ["db", "errors", "error-codes"],
  ["operations", "observability", "ledger", "catalog", "gateway", "session", "coupons"],
  ["payments"],
  ["orders"],
  ["refunds"],
  ["fulfilment", "reconciliation", "story"],
  ["admin"],
  ["trpc", "rest", "admission", "app-context", "merchant-jobs", "all-operations"],
];
const SINGLE_FILES = ["errors", "error-codes", "app-context", "merchant-jobs", "all-operations"];
const fileOf = (capability: string) =>
  SINGLE_FILES.includes(capability) ? `src/server/${capability}.ts` : `src/server/${capability}/planted.ts`;
const moduleOf = (capability: string) =>
  SINGLE_FILES.includes(capability) ? `~/server/${capability}` : `~/server/${capability}/x`;
/** One file per capability, importing one name from each of `others`. */
function importing(capabilities: string[], others: (level: number) => string[]): Record<string, string> {
  const files: Record<string, string> = {};
  FLOORS.forEach((floor, level) => {
    const targets = others(level);
    if (targets.length === 0) return;
    for (const capability of floor.filter((c) => capabilities.includes(c))) {
      const lines = targets.map((target, i) => `import { x${i} } from "${moduleOf(target)}";`);
      files[fileOf(capability)] =
        `${lines.join("\n")}\nexport const y = [${targets.map((_, i) => `x${i}`).join(", ")}];\n`;
    }
  });
  return files;
}

describe("import boundaries, held by the linter", () => {
  it("every folder and file of src/server stands on a floor", () => {
    const entries = readdirSync("src/server", { withFileTypes: true })
      .filter((e) => !e.name.endsWith(".test.ts"))
      .map((e) => (e.isDirectory() ? e.name : e.name.replace(/\.ts$/, "")));
    expect(entries.filter((name) => !FLOORS.flat().includes(name))).toEqual([]);
  });

  it("every capability of src/server imports only downward: an import of any capability above it is refused", () => {
    const all = FLOORS.flat();
    const upward = importing(all, (level) => FLOORS.slice(level + 1).flat());
    const expected = FLOORS.reduce(
      (sum, floor, level) => sum + floor.length * FLOORS.slice(level + 1).flat().length,
      0,
    );
    const refusals = lint(upward);
    expect(refusals).toHaveLength(expected);
    expect(refusals.every((r) => r.startsWith("Capabilities import only downward"))).toBe(true);
    // The other way round is the direction: each imports from every floor below it.
    expect(lint(importing(all, (level) => FLOORS.slice(0, level).flat()))).toEqual([]);
  });

  it("the idempotency core imports nothing from the app, no framework and no ORM", () => {
    const refused = lint({
      "packages/idempotency/src/a.ts":
        'import { DomainError } from "~/server/errors";\nexport const a = DomainError;\n',
      "packages/idempotency/src/b.ts": 'import { sql } from "drizzle-orm";\nexport const b = sql;\n',
      "packages/idempotency/src/c.ts":
        'import { isTransientError } from "~/shared/postgres-driver";\nexport const c = isTransientError;\n',
      "packages/idempotency/src/adapters/d.ts":
        'import { createApp } from "../../../../examples/express/server";\nexport const d = createApp;\n',
    });
    const count = (words: string) => refused.filter((message) => message.includes(words)).length;
    expect(refused).toHaveLength(4);
    expect(count("The idempotency core imports nothing from the app")).toBe(3);
    expect(count("The idempotency core speaks to PostgreSQL through postgres.js alone")).toBe(1);
    expect(
      lint({
        "packages/idempotency/src/ok.ts":
          'import type postgres from "postgres";\nimport { a } from "./a";\nexport type S = postgres.Sql;\nexport const ok = a;\n',
        "packages/idempotency/src/a.ts": "export const a = 1;\n",
        "packages/idempotency/src/adapters/ok.ts": 'import { a } from "../a";\nexport const ok = a;\n',
      }),
    ).toEqual([]);
  });
});
