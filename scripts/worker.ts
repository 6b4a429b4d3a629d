/**
 * `npm run worker`: the event worker on its own (outbox relay + consumers),
 * against the same database as the app. Start as many as you like.
 */
import { getEnv } from "~/env";
import { getAppContext } from "~/server/app-context";
import { closeDb } from "~/server/db/client";
import { startEventWorker } from "~/server/jobs";
import { getLogger } from "~/shared/logger";
import { assertDriverPatched } from "~/shared/postgres-driver";

assertDriverPatched();
const env = getEnv();
if (!env.DATABASE_URL) {
  console.log(
    `[worker] DATABASE_URL is unset: using the embedded PostgreSQL of \`npm start\` (port ${env.EMBEDDED_PG_PORT})`,
  );
}
const worker = await startEventWorker();
if (!worker) process.exit(1);
getLogger().info("event worker running");
const stop = async () => {
  await worker.stop();
  await getAppContext()
    .telemetry.attempts?.flush()
    .catch(() => {});
  await closeDb(getAppContext().db);
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
