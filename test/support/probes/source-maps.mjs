// Preloaded into the production server by test/source-maps.test.ts: every 100 ms it writes whether source maps
// are on, and whether the server's bundle and Next's page runtime (loaded by the first page) had their maps kept.
import { writeFileSync } from "node:fs";
import { createRequire, findSourceMap } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const report = process.env.SOURCE_MAPS_REPORT;
const runtime = createRequire(import.meta.url).resolve(
  "next/dist/compiled/next-server/app-page-turbo.runtime.prod.js",
);
if (report) {
  setInterval(() => {
    const state = {
      enabled: process.sourceMapsEnabled,
      serverMap: findSourceMap(pathToFileURL(path.resolve(".next/serve/server.mjs")).href) !== undefined,
      pageRuntimeMap: findSourceMap(runtime) !== undefined,
    };
    writeFileSync(report, JSON.stringify(state));
  }, 100).unref();
}
