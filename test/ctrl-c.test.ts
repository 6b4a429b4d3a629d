import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../scripts/lib/free-port";

/**
 * Ctrl-C on `npm start`, as a terminal sends it: SIGINT to the launcher's whole process group (npm, tsx, the
 * launcher, the app server). The app stops, and so does the embedded PostgreSQL that no other launcher uses.
 */
const dir = mkdtempSync(path.join(os.tmpdir(), "ctrl-c-"));
// As root, PostgreSQL runs as another user, who must reach the data folder.
chmodSync(dir, 0o755);
afterAll(() => {
  for (const dataDir of [first, second]) {
    const pid = postmasterPid(dataDir);
    if (pid) process.kill(pid, "SIGKILL");
  }
  rmSync(dir, { recursive: true, force: true });
});
const first = path.join(dir, "first");
const second = path.join(dir, "second");

function postmasterPid(dataDir: string): number | undefined {
  const file = path.join(dataDir, "postmaster.pid");
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, "utf8").split("\n")[0]);
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

/** `npm start` as a terminal runs it: the leader of a process group of its own. Resolves once it serves. */
async function npmStart(dataDir: string): Promise<ChildProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    EMBEDDED_PG_PORT: String(await freePort()),
    PORT: String(await freePort()),
    LOG_LEVEL: "warn",
  };
  delete env.DATABASE_URL;
  const child = spawn("npm", ["start"], { detached: true, env, stdio: ["ignore", "pipe", "pipe"] });
  let said = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not serve in 90 s:\n${said}`)), 90_000);
    const heard = (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes("serving on")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", heard);
    child.stderr?.on("data", heard);
    child.once("exit", (code) => reject(new Error(`npm start exited (${code}):\n${said}`)));
  });
  // Up: the database runs and the shop answers.
  await expect.poll(() => postmasterPid(dataDir), { timeout: 10_000 }).toBeDefined();
  await expect
    .poll(async () => (await fetch(`http://127.0.0.1:${env.PORT}/`).catch(() => undefined))?.status, {
      timeout: 60_000,
      interval: 250,
    })
    .toBe(200);
  return child;
}

async function ctrlC(child: ChildProcess, times: number) {
  const exited = new Promise((resolve) => child.once("exit", resolve));
  for (let i = 0; i < times; i++) {
    try {
      process.kill(-(child.pid ?? 0), "SIGINT");
    } catch {
      break; // the group is gone already
    }
    // The next one while it stops (its app server takes longer than this to finish).
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await exited;
}

describe("Ctrl-C on npm start", () => {
  it("stops the app and the embedded PostgreSQL it alone uses, leaving no holder behind", {
    timeout: 150_000,
  }, async () => {
    const child = await npmStart(first);
    await ctrlC(child, 1);
    await expect.poll(() => postmasterPid(first), { timeout: 15_000, interval: 200 }).toBeUndefined();
    expect(readdirSync(`${first}.holders`)).toEqual([]);
  });

  it("a second Ctrl-C while it stops does not leave the server behind", { timeout: 150_000 }, async () => {
    const child = await npmStart(second);
    await ctrlC(child, 2);
    await expect.poll(() => postmasterPid(second), { timeout: 15_000, interval: 200 }).toBeUndefined();
    expect(readdirSync(`${second}.holders`)).toEqual([]);
  });
});
