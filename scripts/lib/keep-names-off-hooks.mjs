/**
 * The module hooks of ./keep-names-off.mjs: this project's TypeScript modules compiled by esbuild as tsx
 * compiles them (ESM for this Node, whitespace minified, an inline source map without sources, the
 * tsconfig's compiler options), but without keepNames. Everything else (resolution, the `~/` paths,
 * JavaScript, packages) stays tsx's.
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { transform } from "esbuild";

const TYPESCRIPT = /\.(ts|tsx|mts)$/;
const { compilerOptions } = JSON.parse(readFileSync(new URL("../../tsconfig.json", import.meta.url), "utf8"));
const OPTIONS = {
  format: "esm",
  target: `node${process.versions.node}`,
  minifyWhitespace: true,
  sourcemap: "inline",
  sourcesContent: false,
  tsconfigRaw: { compilerOptions },
};

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:")) return nextLoad(url, context);
  const file = fileURLToPath(url.split("?")[0]);
  const extension = TYPESCRIPT.exec(file)?.[1];
  if (!extension || file.includes(`${path.sep}node_modules${path.sep}`)) return nextLoad(url, context);
  const { code } = await transform(await readFile(file, "utf8"), {
    ...OPTIONS,
    loader: extension === "tsx" ? "tsx" : "ts",
    sourcefile: file,
  });
  return { format: "module", source: code, shortCircuit: true };
}
