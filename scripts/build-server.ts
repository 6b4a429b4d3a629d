/** `npm run build`'s second half: the production server compiled ahead of time (./lib/server-bundle.ts). */
import { buildServer, SERVER_DIR } from "./lib/server-bundle";

const started = performance.now();
await buildServer();
console.log(`[build] the production server: ${SERVER_DIR} (${Math.round(performance.now() - started)} ms)`);
