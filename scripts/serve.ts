/**
 * The production server (`npm start` runs it after the database is ready; tests,
 * the benchmark and the chaos run start it too). One Node HTTP server:
 * route handlers (src/app/api/**, src/app/provider/api/**) are called directly
 * (src/server/http/route-handlers.ts), everything else — pages, assets — goes to
 * Next's request handler. Background jobs run here, once per process.
 * SIGTERM / SIGINT: stop accepting, finish what is running, stop the jobs, close
 * the database, exit 0.
 */
import { createServer } from "node:http";
import path from "node:path";
import next from "next";
import { getEnv } from "~/env";
import { getAppContext } from "~/server/app-context";
import { closeDb } from "~/server/db/client";
import { loadRouteHandlers } from "~/server/http/route-handlers";
import { startBackgroundJobs, stopBackgroundJobs } from "~/server/jobs";
import { getLogger } from "~/server/logger";

const env = getEnv();
const host = env.HOST;
const log = getLogger();

// Created here first, so the route handlers and Next's pages share one context (and one pool).
const app = getAppContext();
startBackgroundJobs();
const routes = await loadRouteHandlers(path.resolve("src/app"));
const nextApp = next({ dev: false, dir: process.cwd(), hostname: host, port: env.PORT });
await nextApp.prepare();
const handleWithNext = nextApp.getRequestHandler();

const server = createServer((req, res) => {
  const served = routes.serve(req, res, (err) =>
    log.error({ err, method: req.method, url: req.url }, "unhandled error in route handler"),
  );
  if (!served) void handleWithNext(req, res);
});
// Longer than a typical load balancer's idle timeout, so it closes idle connections first.
server.keepAliveTimeout = 65_000;
server.listen(env.PORT, host, () => {
  log.info({ port: env.PORT, routes: routes.routes.length }, "serving");
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, "stopping");
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const force = setTimeout(() => server.closeAllConnections(), 10_000);
  force.unref();
  await closed;
  await stopBackgroundJobs();
  await nextApp.close().catch(() => {});
  await closeDb(app.db).catch(() => {});
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
