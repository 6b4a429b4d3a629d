// Builds the package into dist/: its entries as ES modules (esbuild: the core, and an adapter per framework,
// sharing one chunk; postgres.js stays an import) and their declarations
// (tsc), whose relative imports get the ".js" that Node's ES module resolution asks of them.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(root, "dist");
rmSync(dist, { recursive: true, force: true });
const ADAPTERS = ["express", "fastify", "hono"];
await build({
  entryPoints: ["index", ...ADAPTERS.map((name) => `adapters/${name}`)].map((entry) =>
    path.join(root, `src/${entry}.ts`),
  ),
  outdir: dist,
  outbase: path.join(root, "src"),
  splitting: true,
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: ["postgres"],
  // lru-cache is bundled, with its licence's notice: the package installs with postgres.js, its peer, alone.
  banner: {
    js: "// Bundles lru-cache (https://github.com/isaacs/node-lru-cache), licensed BlueOak-1.0.0: https://blueoakcouncil.org/license/1.0.0",
  },
});
const tsc = path.join(root, "../../node_modules/typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], { stdio: "inherit" });
for (const file of readdirSync(dist, { recursive: true }).filter((name) => String(name).endsWith(".d.ts"))) {
  const full = path.join(dist, String(file));
  const text = readFileSync(full, "utf8").replace(
    /(from\s+["'])(\.\.?\/[^"']+?)(["'])/g,
    (_, open, spec, close) => (spec.endsWith(".js") ? `${open}${spec}${close}` : `${open}${spec}.js${close}`),
  );
  writeFileSync(full, text);
}
console.log(`[idempotency] built ${path.relative(process.cwd(), dist)}`);
