/**
 * `npm run cluster`: the scale-out deployment on this machine. A Patroni cluster of PostgreSQL 15 (a
 * primary and a synchronous standby, etcd as Patroni's store), HAProxy in front of it routing to the
 * current primary, two app instances and one event worker, and HAProxy's second frontend in front of the
 * instances. Prints every part's address; Ctrl-C stops it all. Each start is a new cluster (its data is
 * removed on stop). Needs Debian's `patroni etcd-server haproxy` and PostgreSQL's server binaries.
 *   --async-replication   synchronous_mode off (see docs/scale-out.md for what that can lose)
 * The app's frontend listens on PORT (3000); POSTGRES_FRONTEND_PORT (default: a free port) for PostgreSQL.
 */
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { getEnv } from "~/env";
import { closeDb, createDb, pgClient } from "~/server/db/client";
import { runMigrations } from "~/server/db/migrate";
import { seedCatalogue } from "~/server/db/seed";
import { AppCluster } from "./lib/app-cluster";
import { ensureBuild } from "./lib/build";
import { exitWith } from "./lib/exit";
import { freePort } from "./lib/free-port";
import { HaStack, missingTools } from "./lib/ha/stack";

const LOGS = ".data/cluster-logs";
const log = (message: string) => console.log(`[cluster] ${message}`);

async function main(): Promise<number> {
  const env = getEnv();
  const missing = missingTools();
  if (missing.length > 0) {
    log(
      `missing: ${missing.join(", ")}. Install with: apt-get install -y patroni etcd-server haproxy postgresql`,
    );
    return 1;
  }
  await ensureBuild(log);
  rmSync(LOGS, { recursive: true, force: true });
  mkdirSync(LOGS, { recursive: true });
  const appPorts = [await freePort(), await freePort()];
  const stack = new HaStack({
    synchronous: !process.argv.includes("--async-replication"),
    appPorts,
    appPort: env.PORT,
    ...(process.env.POSTGRES_FRONTEND_PORT
      ? { postgresPort: Number(process.env.POSTGRES_FRONTEND_PORT) }
      : {}),
    log,
    logDir: path.join(LOGS, "database"),
  });
  let apps: AppCluster | undefined;
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log("stopping the app instances, the worker, HAProxy, Patroni and etcd");
    const failed = (what: string) => (error: unknown) =>
      log(`${what} did not stop cleanly: ${error instanceof Error ? error.message : String(error)}`);
    await apps?.stop().catch(failed("the app instances"));
    await stack.stop().catch(failed("the database cluster"));
    log("stopped");
    exitWith(code);
  };
  // Added beside tsx's own listeners, which tell the tsx parent that the signal arrived (without them it
  // SIGKILLs this process 60 ms later, and the cluster's processes and folder are left behind).
  process.on("SIGINT", () => void stop(0));
  process.on("SIGTERM", () => void stop(0));
  try {
    await stack.start();
    const admin = pgClient(stack.databaseUrl(), { max: 1, onnotice: () => {} });
    await admin.unsafe("CREATE DATABASE checkout");
    await admin.end();
    const databaseUrl = stack.databaseUrl("checkout");
    await runMigrations(databaseUrl);
    const db = createDb(databaseUrl, { max: 1 });
    await seedCatalogue(db);
    await closeDb(db);
    apps = new AppCluster({
      databaseUrl,
      env: {
        SESSION_SECRET: env.SESSION_SECRET,
        PROVIDER_WEBHOOK_SECRET: env.PROVIDER_WEBHOOK_SECRET,
        ADMIN_TOKEN: env.ADMIN_TOKEN,
        LOG_LEVEL: env.LOG_LEVEL,
      },
      logDir: LOGS,
      log,
      loadBalancer: { url: stack.appUrl, appPorts },
    });
    await apps.start();
  } catch (error) {
    log(`could not start: ${error instanceof Error ? error.message : String(error)}`);
    await stop(1);
    return 1;
  }
  const token = env.generatedSecrets.includes("ADMIN_TOKEN") ? env.ADMIN_TOKEN : "<ADMIN_TOKEN>";
  log("running:");
  for (const node of stack.restUrls()) {
    log(`  PostgreSQL ${node.name}   127.0.0.1:${node.pgPort}  (Patroni REST ${node.url}/cluster)`);
  }
  log(`  etcd            ${stack.etcdUrl}`);
  log(`  HAProxy → primary  ${stack.databaseUrl("checkout")}`);
  for (const [i, port] of appPorts.entries()) log(`  app instance ${"AB"[i]}  http://127.0.0.1:${port}`);
  log(`  HAProxy → apps  ${stack.appUrl}`);
  log(`  logs            ${LOGS}/`);
  log(`open ${stack.appUrl} (operations: ${stack.appUrl}/admin?token=${token})`);
  log("Ctrl-C stops it all");
  return await new Promise<number>(() => {});
}

main().then(exitWith, (error: unknown) => {
  console.error("[cluster] failed:", error);
  exitWith(1);
});
