import { type ChildProcess, spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { pgClient } from "~/server/db/client";
import { freePort } from "../scripts/lib/free-port";
import {
  TEST_SERVER_ADMIN_TOKEN,
  TEST_SERVER_SESSION_SECRET,
  TEST_SERVER_WEBHOOK_SECRET,
} from "./support/app-server";
import { databaseUrl, uniqueName } from "./support/names";

/**
 * The production path as separate commands, in order, against a database of its own that starts empty: the
 * build is there (the test run's), `npm run db:migrate` is the release step (twice: the second finds nothing to
 * do), `npm run serve` serves only (no build, migration or seed of its own) and refuses to start, naming each
 * problem, until it may; then its health, readiness and drain.
 */
const adminUrl = inject("pgAdminUrl");
const name = uniqueName("production_path");
const url = databaseUrl(adminUrl, name);
const secrets = {
  ADMIN_TOKEN: TEST_SERVER_ADMIN_TOKEN,
  PROVIDER_WEBHOOK_SECRET: TEST_SERVER_WEBHOOK_SECRET,
  SESSION_SECRET: TEST_SERVER_SESSION_SECRET,
};

beforeAll(async () => {
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
});
/** Every process group this file started: none outlives it, whatever failed. */
const groups: number[] = [];
afterAll(async () => {
  for (const group of groups) {
    try {
      process.kill(-group, "SIGKILL");
    } catch {
      // already gone
    }
  }
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
});

function npmRun(script: string, env: Record<string, string | undefined>) {
  const environment: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "warn", ...env };
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete environment[key];
  // A process group of its own, as a supervisor runs it: a stop signal goes to the group (npm, sh, node).
  const child = spawn("npm", ["run", "--silent", script], {
    env: environment,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  if (child.pid) groups.push(child.pid);
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, exited, output: () => output };
}

async function serveUntilReady(
  env: Record<string, string>,
): Promise<{ base: string; child: ChildProcess; exited: Promise<number | null>; output: () => string }> {
  const port = await freePort();
  const run = npmRun("serve", {
    ...secrets,
    DATABASE_URL: url,
    PORT: String(port),
    HOST: "127.0.0.1",
    ...env,
  });
  const base = `http://127.0.0.1:${port}`;
  await expect
    .poll(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.status, {
      timeout: 90_000,
      interval: 250,
    })
    .toBe(200);
  return { base, child: run.child, exited: run.exited, output: run.output };
}

describe("the production path, step by step", () => {
  it("npm run serve refuses to start, naming each problem: no DATABASE_URL, no secrets", {
    timeout: 60_000,
  }, async () => {
    const run = npmRun("serve", {
      DATABASE_URL: undefined,
      ADMIN_TOKEN: undefined,
      SESSION_SECRET: "twenty-characters-xx",
      PROVIDER_WEBHOOK_SECRET: TEST_SERVER_WEBHOOK_SECRET,
    });
    expect(await run.exited).toBe(1);
    const said = run.output();
    expect(said).toMatch(/cannot start: DATABASE_URL is not set/);
    expect(said).toMatch(/cannot start: SESSION_SECRET is too short/);
    expect(said).toMatch(/cannot start: ADMIN_TOKEN is not set/);
  });

  it("npm run serve refuses a database whose schema is behind, and says to run npm run db:migrate", {
    timeout: 60_000,
  }, async () => {
    const run = npmRun("serve", { ...secrets, DATABASE_URL: url });
    expect(await run.exited).toBe(1);
    expect(run.output()).toMatch(/cannot start: the database has no schema yet: run npm run db:migrate/);
  });

  it("npm run db:migrate is the release step, and a second run changes nothing", {
    timeout: 120_000,
  }, async () => {
    const first = npmRun("db:migrate", { DATABASE_URL: url });
    expect(await first.exited).toBe(0);
    const sql = pgClient(url, { max: 1, onnotice: () => {} });
    const count = async () =>
      (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`)[0]?.n;
    const applied = await count();
    expect(applied).toBeGreaterThan(30);
    const second = npmRun("db:migrate", { DATABASE_URL: url });
    expect(await second.exited).toBe(0);
    expect(await count()).toBe(applied);
    await sql.end();
  });

  it("npm run serve then serves: /healthz alive, /readyz ready; on SIGTERM /readyz drains while the shop still answers, then it stops", {
    timeout: 120_000,
  }, async () => {
    const { base, child, exited, output } = await serveUntilReady({
      HTTP_DRAIN_GRACE_MS: "2000",
      LOG_LEVEL: "info",
    });
    if (child.exitCode !== null) throw new Error(`npm run serve exited:\n${output()}`);
    const ready = await fetch(`${base}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([200, { status: "ready" }]);
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: "alive" });

    process.kill(-(child.pid ?? 0), "SIGTERM");
    await expect
      .poll(async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status, {
        timeout: 1_500,
        interval: 50,
      })
      .toBe(503);
    const draining = await fetch(`${base}/readyz`);
    expect(await draining.json()).toMatchObject({ status: "draining" });
    // During the grace, requests are still served.
    expect((await fetch(`${base}/api/trpc/catalog.list`)).status).toBe(200);
    // npm itself takes the signal too (a supervisor sees it end by SIGTERM); the server drains, then stops:
    // every process of the group is gone within the grace and the drain's bound.
    await exited;
    const groupAlive = () => {
      try {
        process.kill(-(child.pid ?? 0), 0);
        return true;
      } catch {
        return false;
      }
    };
    await expect.poll(groupAlive, { timeout: 15_000, interval: 100 }).toBe(false);
    expect(output()).toMatch(/"msg":"draining: \/readyz answers 503"/);
    expect(output()).toMatch(/"msg":"stopping"/);
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });
});
