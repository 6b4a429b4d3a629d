import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { assertDriverPatched, postgresPackageDir } from "./postgres-driver";

describe("the start-up check of the postgres.js patch", () => {
  it("accepts the installed, patched driver", () => {
    expect(() => assertDriverPatched()).not.toThrow();
  });

  it("refuses a driver installed without the patch (npm ci --ignore-scripts), naming the fix", () => {
    const copy = mkdtempSync(path.join(tmpdir(), "pg-unpatched-"));
    try {
      for (const file of ["src/connection.js", "cjs/src/connection.js"]) {
        cpSync(path.join(postgresPackageDir(), file), path.join(copy, file));
      }
      // The unpatched text: the patch's markers gone from the ESM build.
      const esm = path.join(copy, "src/connection.js");
      writeFileSync(esm, readFileSync(esm, "utf8").replaceAll("porsager/postgres#", "upstream issue "));
      expect(() => assertDriverPatched(copy)).toThrow(/not patched.*patch-package/);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
