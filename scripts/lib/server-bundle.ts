/**
 * The production server compiled ahead of time. `npm run build` bundles scripts/serve.ts (src/host/server.ts and
 * everything it imports of the project: src, packages/idempotency, the route files) with esbuild into one ES module,
 * `.next/serve/server.mjs`, which scripts/run-server.mjs runs (`npm run serve`). Packages stay imports of
 * node_modules. The server then starts with no TypeScript loader in its process: no loader thread (about 30 MB),
 * nothing compiled at start, and no keepNames wrapper around every named closure (./keep-names-off.mjs says what
 * that cost).
 *
 * What the bundle must keep of the sources' meaning, and how:
 * - the route files, which the server finds by walking src/app (src/host/route-table.ts): the walk is done here,
 *   and src/host/bundled-routes.ts is replaced by a table of static imports of the same files, each evaluated
 *   when the route table loads it, as the walk would;
 * - `import.meta.url` in a project file (the migrations' folder is found from it): replaced by the URL of the
 *   original file, relative to the bundle, so the checkout may move as a whole;
 * - source maps: scripts/run-server.mjs turns Node's source maps on before it loads the bundle only when
 *   SOURCE_MAPS=true, so by default no map is kept (docs/configuration.md).
 *
 * The bundle lives in `.next`, so a new `next build` removes an old one. `ensureBuild` (./build.ts) builds it
 * again whenever a source it is built from is newer than it.
 */
import { mkdirSync, readFileSync, renameSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";
import { directRouteFiles } from "~/host/route-table";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const SERVER_DIR = path.join(ROOT, ".next", "serve");
/** What node runs: `node <heap settings> scripts/run-server.mjs`, which loads the bundle. */
export const SERVER_ENTRY = path.join(ROOT, "scripts", "run-server.mjs");
export const SERVER_BUNDLE = path.join(SERVER_DIR, "server.mjs");
/** What the bundle is built from: when any of it is newer than the bundle, the bundle is built again. */
export const SERVER_SOURCES = [
  "src",
  "packages/idempotency/src",
  "packages/idempotency/package.json",
  "scripts/serve.ts",
  "scripts/run-server.mjs",
  "scripts/lib/profile-on-signal.ts",
  "scripts/lib/server-bundle.ts",
  "tsconfig.json",
  "package-lock.json",
].map((source) => path.join(ROOT, source));

/** src/host/bundled-routes.ts, as the bundle holds it: every direct route file, imported when it is loaded. */
function bundledRoutesText(appDir: string): string {
  const lines = directRouteFiles(appDir).map(
    ({ route, file }) => `  ${JSON.stringify(route)}: () => import(${JSON.stringify(file)}),`,
  );
  return `export const BUNDLED_ROUTES = {\n${lines.join("\n")}\n};\n`;
}

function projectSources(): Plugin {
  const bundledRoutes = path.join(ROOT, "src", "host", "bundled-routes.ts");
  return {
    name: "project-sources",
    setup(builder) {
      builder.onLoad({ filter: /\.tsx?$/ }, (args) => {
        if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        const loader = args.path.endsWith(".tsx") ? "tsx" : "ts";
        const resolveDir = path.dirname(args.path);
        if (args.path === bundledRoutes) {
          return { contents: bundledRoutesText(path.join(ROOT, "src", "app")), loader, resolveDir };
        }
        const text = readFileSync(args.path, "utf8");
        if (!text.includes("import.meta.url")) return undefined;
        const fromBundle = path.relative(SERVER_DIR, args.path).split(path.sep).join("/");
        const url = `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`;
        return { contents: text.replaceAll("import.meta.url", url), loader, resolveDir };
      });
    },
  };
}

/**
 * Builds the bundle and its map; a server starting meanwhile reads the old bundle or the new, never half of one.
 * The files are dated from the build's start, so a source saved while it ran counts as newer.
 */
export async function buildServer(): Promise<void> {
  const started = new Date();
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [path.join(ROOT, "scripts", "serve.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    outfile: SERVER_BUNDLE,
    sourcemap: "linked",
    sourcesContent: false,
    tsconfig: path.join(ROOT, "tsconfig.json"),
    plugins: [projectSources()],
    write: false,
    logLevel: "warning",
  });
  mkdirSync(SERVER_DIR, { recursive: true });
  for (const file of result.outputFiles) {
    const temporary = `${file.path}.${process.pid}.tmp`;
    writeFileSync(temporary, file.contents);
    utimesSync(temporary, started, started);
    renameSync(temporary, file.path);
  }
}
