/**
 * `npm run worker`: the event worker on its own (outbox relay + consumers),
 * against the same database as the app. Start as many as you like.
 */
import { getEnv } from "~/env";
import { getAppContext } from "~/server/app-context";
import { closeDb } from "~/server/db/client";
import { startEventWorker } from "~/server/merchant-jobs";
import { getLogger } from "~/shared/logger";
import { assertDriverPatched } from "~/shared/postgres-driver";

assertDriverPatched();
const env = getEnv();
if (!env.DATABASE_URL) {
  console.log(
    `[worker] DATABASE_URL is unset: using the embedded PostgreSQL of \`npm start\` (port ${env.EMBEDDED_PG_PORT})`,
  );
}
// Stuck even with new job runners (its connections hung by a failover, say): exit, and whoever runs the
// worker starts it afresh. EX_SOFTWARE, so a supervisor's log tells it from a clean stop.
const starting = startEventWorker({
  onGiveUp: (reason) => {
    getLogger().fatal({ reason }, "event worker stuck; exiting so that its supervisor restarts it");
    setTimeout(() => process.exit(70), 100).unref();
  },
});
// Listening before the worker has started: a SIGTERM that arrives while it starts is a clean stop too (it
// waits for the start, then stops), not Node's default death by signal (exit 143).
const stop = async () => {
  await (await starting)?.stop();
  await getAppContext()
    .telemetry.attempts?.flush()
    .catch(() => {});
  await closeDb(getAppContext().db);
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
if (!(await starting)) process.exit(1);
getLogger().info("event worker running");
