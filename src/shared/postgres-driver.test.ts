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
      const files = ["src/connection.js", "cjs/src/connection.js", "src/index.js", "cjs/src/index.js"];
      for (const file of files) {
        cpSync(path.join(postgresPackageDir(), file), path.join(copy, file));
      }
      expect(() => assertDriverPatched(copy)).not.toThrow();
      // The unpatched text: one of the patch's markers gone from one file of one build.
      const unpatch = (file: string, marker: string) => {
        const target = path.join(copy, file);
        const text = readFileSync(target, "utf8");
        writeFileSync(target, text.replaceAll(marker, "upstream"));
        expect(() => assertDriverPatched(copy)).toThrow(new RegExp(`not patched \\(${file}.*patch-package`));
        writeFileSync(target, text);
      };
      unpatch("src/connection.js", "porsager/postgres#");
      unpatch("cjs/src/index.js", "exactly-once-checkout: released-after-close");
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it("every command that opens the database checks it first (npm start and dev, the worker, migrate, reconcile, the server)", () => {
    const entries = [
      "scripts/start.ts",
      "scripts/worker.ts",
      "scripts/migrate.ts",
      "scripts/reconcile.ts",
      "src/host/server.ts",
    ];
    expect(entries.filter((file) => !/^assertDriverPatched\(\);$/m.test(readFileSync(file, "utf8")))).toEqual(
      [],
    );
  });
});
