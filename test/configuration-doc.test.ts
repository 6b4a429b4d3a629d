import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SETTINGS } from "~/env";
import { sourceFiles } from "./support/source-files";

/**
 * docs/configuration.md against the settings the code reads, both ways: every documented setting is read,
 * with the default the doc gives; every setting read (src/env.ts's schema, and `env.X` / `process.env.X` in
 * the app, the scripts and the tools' configs) is documented.
 */
const DOC = readFileSync("docs/configuration.md", "utf8");

/** Each row's settings (a row may document two: `A` / `B`) and its default cell. */
const ROWS = DOC.split("\n")
  .filter((line) => /^\| `[A-Z]/.test(line))
  .map((line) => {
    const [names = "", defaults = ""] = line
      .split("|")
      .slice(1)
      .map((cell) => cell.trim());
    return {
      names: [...names.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] ?? ""),
      defaults: [...defaults.matchAll(/`([^`]*)`/g)].map((m) => m[1] ?? ""),
    };
  });
const DOCUMENTED = new Map(
  ROWS.flatMap((row) => row.names.map((name, i) => [name, row.defaults[i]] as const)),
);

/** Set by our own tools for the processes they start, or by Next: nobody sets them by hand. */
const INTERNAL = new Set(["NEXT_RUNTIME", "FLOOR_USER_ID", "BENCH_PROFILE_DIR", "CI"]);

const READ = new Set([
  ...Object.keys(SETTINGS.shape),
  ...[
    ...sourceFiles("src"),
    ...sourceFiles("scripts"),
    "playwright.config.ts",
    "next.config.ts",
    "drizzle.config.ts",
  ]
    .flatMap((file) => [...readFileSync(file, "utf8").matchAll(/\benv\.([A-Z][A-Z0-9_]{2,})\b/g)])
    .map((m) => m[1] ?? ""),
]);

describe("docs/configuration.md", () => {
  it("documents every setting the code reads", () => {
    expect([...READ].filter((name) => !INTERNAL.has(name) && !DOCUMENTED.has(name)).sort()).toEqual([]);
  });

  it("documents only settings the code reads", () => {
    expect([...DOCUMENTED.keys()].filter((name) => !READ.has(name)).sort()).toEqual([]);
  });

  it("gives each setting of src/env.ts the default the code has", () => {
    const shape = SETTINGS.shape as Record<
      string,
      { safeParse(value: unknown): { success: boolean; data?: unknown } }
    >;
    const wrong = Object.entries(shape).flatMap(([name, setting]) => {
      const parsed = setting.safeParse(undefined);
      const documented = DOCUMENTED.get(name);
      // Optional settings have no default value (the doc says what happens unset).
      if (!parsed.success || parsed.data === undefined || documented === undefined) return [];
      return String(parsed.data) === documented
        ? []
        : [`${name}: code ${String(parsed.data)}, doc ${documented}`];
    });
    expect(wrong).toEqual([]);
  });
});
