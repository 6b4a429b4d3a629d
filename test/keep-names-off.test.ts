import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { KEEP_NAMES_OFF } from "../scripts/lib/app-process";

// The bench's own servers run their TypeScript under tsx without esbuild's keepNames
// (scripts/lib/keep-names-off.mjs): the functions a request creates are not renamed by an Object.defineProperty
// each, and still carry their names. The production server's bundle is compiled without it too
// (test/server-bundle.test.ts).
const dir = mkdtempSync(path.join(tmpdir(), "keep-names-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module" }));
writeFileSync(
  path.join(dir, "closures.ts"),
  `export function request(n: number) {
     const arrow = (x: number) => x + n;
     const rendering = { render: (x: number) => x * n };
     function nested() { return n; }
     return [arrow.name, rendering.render.name, nested.name, arrow(1) + rendering.render(1) + nested()] as const;
   }`,
);
writeFileSync(
  path.join(dir, "probe.mts"),
  `const define = Object.defineProperty;
   let calls = 0;
   Object.defineProperty = function (...args) { calls++; return define.apply(this, args); };
   const { request } = await import("./closures.ts");
   const before = calls;
   const [arrow, render, nested] = request(1);
   for (let i = 0; i < 99; i++) request(i);
   console.log(JSON.stringify({ names: [arrow, render, nested], calls: calls - before }));`,
);
const probe = (...imports: string[]) =>
  JSON.parse(
    execFileSync(
      process.execPath,
      [...imports.flatMap((i) => ["--import", i]), path.join(dir, "probe.mts")],
      {
        encoding: "utf8",
      },
    ),
  ) as { names: string[]; calls: number };

it("tsx alone defines the name of every function a call creates, once per call", () => {
  expect(probe("tsx")).toEqual({ names: ["arrow", "render", "nested"], calls: 300 });
});

it("the keepNames hook's loaders define none, and the functions keep their names", () => {
  expect(probe("tsx", KEEP_NAMES_OFF)).toEqual({ names: ["arrow", "render", "nested"], calls: 0 });
});
