/**
 * One command for the whole app: database (embedded unless DATABASE_URL is set),
 * migrations, seed data, then the app server. `tsx scripts/start.ts dev` for development,
 * `tsx scripts/start.ts` for the production build (built first if needed).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { getEnv } from "~/env";
import { productionSecretProblems } from "~/env-secrets";
import { assertDriverPatched } from "~/shared/postgres-driver";
import { SERVE_ARGS, SERVE_ENV } from "./lib/app-process";
import { ensureBuild, NEXT_BIN } from "./lib/build";
import { prepareDatabase } from "./lib/database";
import { removeEmbeddedData } from "./lib/embedded-postgres";
import { explainStartFailure } from "./lib/start-failure";

// Refuses to run on a postgres.js installed without our patch (npm ci --ignore-scripts), naming the fix.
assertDriverPatched();

const args = process.argv.slice(2);
const mode = args.includes("dev") ? "dev" : "start";
/** `--fresh`: start from an empty embedded database (end-to-end tests). */
const fresh = args.includes("--fresh");
const log = (message: string) => console.log(`[checkout] ${message}`);

async function main() {
  const env = getEnv();
  // The production server refuses secrets set too short by hand: say so now, before announcing anything.
  const refused = mode === "start" ? productionSecretProblems(env) : [];
  if (refused.length > 0) {
    for (const problem of refused) console.error(`[checkout] ${problem}`);
    console.error("[checkout] npm start runs the production server (NODE_ENV=production), which needs them");
    process.exit(1);
  }
  if (fresh && !env.DATABASE_URL) await removeEmbeddedData(env.DATA_DIR);
  const database = await prepareDatabase(env, log, { throwaway: fresh });
  if (mode === "start") await ensureBuild(log);

  // Production: scripts/serve.ts (route handlers called directly, pages through Next). Development: `next dev`.
  const command = mode === "dev" ? [NEXT_BIN, "dev", "-p", String(env.PORT)] : SERVE_ARGS;
  const child: ChildProcess = spawn(process.execPath, command, {
    stdio: "inherit",
    env: {
      ...process.env,
      ...(mode === "dev" ? {} : SERVE_ENV),
      DATABASE_URL: database.url,
      NEXT_TELEMETRY_DISABLED: "1",
      // One instance and no load balancer: Ctrl-C closes the listener at once (unless told otherwise).
      HTTP_DRAIN_GRACE_MS: process.env.HTTP_DRAIN_GRACE_MS ?? "0",
      // Given, or generated on first start and kept in SECRETS_FILE: the server (NODE_ENV=production) needs them given.
      SESSION_SECRET: env.SESSION_SECRET,
      PROVIDER_WEBHOOK_SECRET: env.PROVIDER_WEBHOOK_SECRET,
      ADMIN_TOKEN: env.ADMIN_TOKEN,
      ...(mode === "dev" ? {} : { NODE_ENV: "production" }),
    },
  });
  log(`serving on http://localhost:${env.PORT}`);
  // Only a generated token is printed (it is in SECRETS_FILE anyway); one set by the operator stays a secret.
  const token = env.generatedSecrets.includes("ADMIN_TOKEN") ? env.ADMIN_TOKEN : "<ADMIN_TOKEN>";
  if (env.generatedSecrets.length > 0) {
    log(
      `secrets not in the environment (${env.generatedSecrets.join(", ")}) are kept in ${env.SECRETS_FILE}`,
    );
  }
  log(`operations: http://localhost:${env.PORT}/admin?token=${token}`);
  log(`payment provider admin: http://localhost:${env.PORT}/provider/admin?token=${token}`);

  let stopping = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping the app and the database`);
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await new Promise((resolve) => child.once("exit", resolve));
      clearTimeout(killer);
    }
    await database.stop();
    process.exit(0);
  };
  // embedded-postgres stops its server on these signals by itself, before the app has finished
  // its requests and jobs; the order here is the app first, then the database. Only the listeners
  // process.listeners() shows are removed: under tsx (npm start, npm run dev) a hidden one tells the tsx
  // parent that this process got the signal; removed, the parent SIGKILLs it 60 ms after a Ctrl-C,
  // before it has stopped the database.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    for (const listener of process.listeners(signal)) process.removeListener(signal, listener);
  }
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  child.on("exit", (code) => {
    if (stopping) return;
    stopping = true;
    log(`the app server exited with ${code}`);
    void database.stop().finally(() => process.exit(code ?? 1));
  });
}

main().catch((error: unknown) => {
  console.error(`[checkout] failed to start: ${explainStartFailure(error, process.env.DATABASE_URL)}`);
  if (process.env.LOG_LEVEL === "debug" || process.env.LOG_LEVEL === "trace") console.error(error);
  process.exit(1);
});
