/**
 * The module hooks of ./keep-names-off.mjs: this project's TypeScript ES modules compiled by esbuild as tsx
 * compiles them (for this Node, whitespace minified, an inline source map without sources, the tsconfig's
 * compiler options), but without keepNames. Everything else stays tsx's: resolution (the `~/` paths), files
 * tsx loads as CommonJS, JSON, JavaScript, packages. What differs from tsx besides keepNames: a dynamic
 * `import()` of a CommonJS module is not given tsx's `__esModule` unwrapping (the server's dynamic imports load
 * its own ES modules), and nothing is cached on disk (the server compiles its files once, at start).
 *
 * esbuild compiles in a child process of its own, some tens of MB that the server's RSS does not show: it is
 * stopped once compiling has been idle for a second (the next compile starts it again).
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stop, transform } from "esbuild";

const TYPESCRIPT = /\.(ts|tsx|mts)$/;
const OPTIONS = {
  format: "esm",
  target: `node${process.versions.node}`,
  minifyWhitespace: true,
  sourcemap: "inline",
  sourcesContent: false,
  // esbuild reads a tsconfig's text itself, comments and trailing commas included.
  tsconfigRaw: readFileSync(new URL("../../tsconfig.json", import.meta.url), "utf8"),
};
const IDLE_MS = 1_000;
let compiling = 0;
let idle;

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || context.format !== "module") return nextLoad(url, context);
  const file = fileURLToPath(url.split("?")[0]);
  const extension = TYPESCRIPT.exec(file)?.[1];
  if (!extension || file.includes(`${path.sep}node_modules${path.sep}`)) return nextLoad(url, context);
  compiling++;
  clearTimeout(idle);
  try {
    const { code } = await transform(await readFile(file, "utf8"), {
      ...OPTIONS,
      loader: extension === "tsx" ? "tsx" : "ts",
      sourcefile: file,
    });
    return { format: "module", source: code, shortCircuit: true };
  } finally {
    if (--compiling === 0) idle = setTimeout(stop, IDLE_MS).unref();
  }
}
