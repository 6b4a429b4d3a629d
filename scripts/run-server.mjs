/**
 * `npm run serve`: the production server as `npm run build` compiled it (./lib/server-bundle.ts), with Node's
 * source maps on only when SOURCE_MAPS=true (the bundle's own map is read, or not, as the bundle loads).
 */
import { existsSync } from "node:fs";

const bundle = new URL("../.next/serve/server.mjs", import.meta.url);
if (!existsSync(bundle)) {
  console.error(
    "[serve] cannot start: there is no build of the server in .next/serve: run npm run build first",
  );
  process.exit(1);
}
process.setSourceMapsEnabled(process.env.SOURCE_MAPS === "true");
await import(bundle.href);
