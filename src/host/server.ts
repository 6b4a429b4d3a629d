/**
 * The production server: one Node HTTP server hosting both parties (the merchant and
 * MockPay). `npm start` runs it (scripts/serve.ts) once the database is ready; tests,
 * the benchmark and the chaos run start it too.
 *
 * Route handlers under DIRECT_PREFIXES are called straight from the route table
 * beside this file (./route-table.ts); pages, assets and everything else go to Next's
 * request handler. What that saves is Next's per-request pipeline, which costs more CPU
 * per API call than the whole idempotent order transaction (`npm run bench` profiles it). A route whose handler
 * carries a plain form (the REST API, the payment notification, tRPC's mutations:
 * src/shared/plain-http.ts) is answered on Node's own request and response, with no Web
 * `Request`/`Response` at all; both forms answer byte for byte alike
 * (test/plain-host.test.ts). The rules that make it safe are enforced, not just written:
 * - direct-served route files use only Web `Request`/`Response`: Biome bans `next/*`
 *   imports under src/app/api and src/app/(mockpay)/provider/api (biome.json);
 * - the proxy (src/proxy.ts) never runs for those prefixes, and its matcher agrees with
 *   DIRECT_PREFIXES (test/production-server.test.ts);
 * - route segment config (`dynamic`, `revalidate`, …) would be ignored here, so a direct
 *   route file may not export any (same test);
 * - `npm run dev` serves the same files through Next alone (smoke test in the same file).
 *
 * Two copies of the server modules: this process runs them from the server's bundle
 * (scripts/lib/server-bundle.ts; under tsx, from the TypeScript), and Next's bundle (pages,
 * the instrumentation hook) holds its own copy of the same modules. That is why the app's and MockPay's contexts and the background jobs
 * are kept on `globalThis` (one pool, one set of jobs per process), and why DomainError is
 * recognised by a Symbol brand rather than by its prototype. Background jobs start in one
 * place: the instrumentation hook (src/host/background-jobs.ts), which Next runs in this process too.
 *
 * SIGTERM / SIGINT: drain (shutdown, below), stop the jobs, close the pools, exit 0. It starts only when it
 * may (./preflight.ts), and answers /healthz and /readyz (./health.ts).
 */
import { createServer } from "node:http";
import path from "node:path";
import next from "next";
import { getEnv } from "~/env";
import { getMockPayContext } from "~/mockpay/server/context";
import { getAppContext } from "~/server/app-context";
import { closeDb } from "~/server/db/client";
import { getLogger } from "~/shared/logger";
import { assertDriverPatched } from "~/shared/postgres-driver";
import { stopBackgroundJobs } from "./background-jobs";
import { compileTrust, stampClient } from "./client-address";
import { createHealth } from "./health";
import { refuseMalformed } from "./http-guard";
import { capConnections, serverTimeouts, wasRefused } from "./limits";
import { startProblems } from "./preflight";
import { loadRouteHandlers } from "./route-table";

assertDriverPatched();
const refused = await startProblems();
if (refused.length > 0) {
  for (const problem of refused) console.error(`[serve] cannot start: ${problem}`);
  process.exit(1);
}
const env = getEnv();
// From here on (Next and its chunks) no module's map is kept unless asked for: they were a fifth of an
// instance's memory (docs/configuration.md, SOURCE_MAPS). The bundle's entry did the same for the bundle; tsx
// turns them on.
process.setSourceMapsEnabled(env.SOURCE_MAPS);
const host = env.HOST;
const log = getLogger();

// Created here first, so the route handlers and Next's pages share one context (and one pool) per party.
const app = getAppContext();
const mockPay = getMockPayContext();
const routes = await loadRouteHandlers(path.resolve("src/app"));
const nextApp = next({ dev: false, dir: process.cwd(), hostname: host, port: env.PORT });
await nextApp.prepare();
const handleWithNext = nextApp.getRequestHandler();

const trust = compileTrust(env.TRUST_PROXY);
/**
 * On every answer, pages and APIs, the merchant's and MockPay's: no MIME sniffing, never framed (MockPay's
 * Confirm must not be clickjacked), no referrer outside the site. A page's CSP allows this site's own scripts
 * and styles (Next inlines its bootstrap, hence 'unsafe-inline') and nothing else; an API answer's (JSON, never
 * a document that loads anything) allows nothing at all, as OWASP's REST cheat sheet has it.
 */
const SECURITY_HEADERS: [string, string][] = [
  ["x-content-type-options", "nosniff"],
  ["x-frame-options", "DENY"],
  ["referrer-policy", "same-origin"],
];
const PAGE_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'; object-src 'none'";
const API_CSP = "default-src 'none'; frame-ancestors 'none'";
const connectionLimits = {
  perAddress: env.HTTP_MAX_CONNECTIONS_PER_ADDRESS,
  total: env.HTTP_MAX_CONNECTIONS,
  requestTimeoutMs: env.HTTP_REQUEST_TIMEOUT_MS,
  headersTimeoutMs: env.HTTP_HEADERS_TIMEOUT_MS,
};
const health = createHealth(app.db.$client);
const server = createServer(serverTimeouts(connectionLimits), (req, res) => {
  if (wasRefused(req.socket)) return;
  if (refuseMalformed(req, res)) return;
  if (health.answer(req, res)) return;
  stampClient(req, trust);
  for (const [name, value] of SECURITY_HEADERS) res.setHeader(name, value);
  res.setHeader("content-security-policy", API_CSP);
  const served = routes.serve(req, res, (err) =>
    log.error({ err, method: req.method, url: req.url }, "unhandled error in route handler"),
  );
  if (!served) {
    res.setHeader("content-security-policy", PAGE_CSP);
    void handleWithNext(req, res);
  }
});
// Longer than a typical load balancer's idle timeout, so it closes idle connections first.
server.keepAliveTimeout = 65_000;
// Behind a trusted proxy every connection comes from the proxy: the per-address cap is the proxy's job then.
capConnections(server, connectionLimits, { perAddress: !env.TRUST_PROXY });
server.listen(env.PORT, host, () => {
  log.info({ port: env.PORT, routes: routes.routes.length }, "serving");
});

let stopping = false;
/** What the background jobs and the pools get to stop, after the drain. */
const STOP_JOBS_MS = 10_000;
/**
 * The drain: /readyz answers 503 at once, new requests are still served for HTTP_DRAIN_GRACE_MS (the load
 * balancer sees the 503 and stops sending), then the listener closes, requests in flight get HTTP_DRAIN_MS to
 * finish (their idempotency keys are stored or freed as they end), the background jobs stop (the worker
 * finishes or gives back its jobs), the pools close, and the process exits 0.
 */
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  health.draining = true;
  // Bounded as a whole: a stop that hangs (the database gone, a job that never returns) must not keep the
  // process, and its port, alive.
  const bound = env.HTTP_DRAIN_GRACE_MS + env.HTTP_DRAIN_MS + STOP_JOBS_MS;
  setTimeout(() => {
    log.error({ signal, boundMs: bound }, "the stop ran past its bound: exiting");
    process.exit(1);
  }, bound).unref();
  log.info({ signal, graceMs: env.HTTP_DRAIN_GRACE_MS }, "draining: /readyz answers 503");
  await new Promise((resolve) => setTimeout(resolve, env.HTTP_DRAIN_GRACE_MS));
  log.info({ signal }, "stopping");
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const force = setTimeout(() => server.closeAllConnections(), env.HTTP_DRAIN_MS);
  force.unref();
  await closed;
  await stopBackgroundJobs();
  await nextApp.close().catch(() => {});
  await closeDb(app.db).catch(() => {});
  await mockPay.db.$client.end({ timeout: 5 }).catch(() => {});
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
