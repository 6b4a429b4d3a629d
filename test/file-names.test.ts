import path from "node:path";
import { describe, expect, it } from "vitest";
import { sourceFiles } from "./support/source-files";

/**
 * A file is named for its role. These names say only "something runs here" or "something about HTTP", and
 * once two folders each had one, a reader could not tell from an import which was meant: each may name one
 * file in src/ at most.
 */
const ROLE_LESS = ["run.ts", "operation.ts", "operations.ts", "http.ts", "jobs.ts"];

describe("file names in src/", () => {
  it("name a role: a role-less name is used once at most", () => {
    const byName = new Map<string, string[]>();
    for (const file of [...sourceFiles("src"), ...sourceFiles("packages/idempotency/src")]) {
      const name = path.basename(file);
      if (ROLE_LESS.includes(name)) byName.set(name, [...(byName.get(name) ?? []), file]);
    }
    expect([...byName.values()].filter((files) => files.length > 1)).toEqual([]);
  });

  it("leave no folder of the app named like the core's (packages/idempotency/src)", () => {
    expect(
      sourceFiles("src/server").filter((file) => file.includes(`${path.sep}idempotency${path.sep}`)),
    ).toEqual([]);
  });
});
