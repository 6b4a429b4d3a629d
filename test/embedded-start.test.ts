import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pgClient } from "~/server/db/client";
import { removeEmbeddedData, startEmbeddedPostgres } from "../scripts/lib/embedded-postgres";
import { freePort } from "../scripts/lib/free-port";

/**
 * `npm start` on the embedded PostgreSQL, in the two ways it used to fail with "…: undefined": run again
 * right after Ctrl-C (the last server still stopping), and a port another program holds.
 */
const dir = mkdtempSync(path.join(os.tmpdir(), "embedded-start-"));
// As root, PostgreSQL runs as another user, who must reach the data folder.
chmodSync(dir, 0o755);
const dataDir = path.join(dir, "pg");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("starting the embedded PostgreSQL", () => {
  it("waits for the server of the same data folder that is still stopping, then starts its own", async () => {
    const port = await freePort();
    const first = await startEmbeddedPostgres({ dataDir, port });
    await first.stop();
    // A server still stopping: its postmaster.pid names a live process that no longer answers. (A real
    // one stops too fast to catch reliably; this one takes 1.5 s.)
    const stopping = spawn(process.execPath, ["-e", "setTimeout(() => {}, 1500)"]);
    writeFileSync(path.join(dataDir, "postmaster.pid"), `${stopping.pid}\n${dataDir}\n`);
    const said: string[] = [];
    const started = Date.now();
    const second = await startEmbeddedPostgres({ dataDir, port, log: (line) => said.push(line) });
    try {
      expect(said.join("\n")).toMatch(
        /waiting for the embedded PostgreSQL that is still starting or stopping/,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
      expect(second.reused).toBe(false);
      const sql = pgClient(second.url(), { max: 1, onnotice: () => {} });
      const [row] = await sql<{ one: number }[]>`SELECT 1 AS one`;
      await sql.end();
      expect(row?.one).toBe(1);
    } finally {
      await second.stop();
    }
  });

  it("Ctrl-C on the npm start that started the server leaves it to a second one using it; the last one out stops it", async () => {
    const port = await freePort();
    const shared = path.join(dir, "shared");
    const module = path.resolve("scripts/lib/embedded-postgres.ts");
    // The first launcher, in a process group of its own as a terminal gives a command; on SIGINT it stops as
    // scripts/start.ts does.
    const launcher = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        `const { startEmbeddedPostgres } = await import(${JSON.stringify(module)});
         const server = await startEmbeddedPostgres({ dataDir: ${JSON.stringify(shared)}, port: ${port} });
         process.on("SIGINT", async () => { await server.stop(); process.exit(0); });
         console.log("ready");
         setInterval(() => {}, 1000);`,
      ],
      { detached: true, stdio: ["ignore", "pipe", "inherit"] },
    );
    await new Promise<void>((resolve, reject) => {
      launcher.stdout?.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve());
      launcher.once("exit", (code) => reject(new Error(`the launcher exited (${code}) before it was ready`)));
    });
    const second = await startEmbeddedPostgres({ dataDir: shared, port });
    try {
      expect(second.reused).toBe(true);
      // Ctrl-C in the first one's terminal: SIGINT to its whole process group.
      const exited = new Promise((resolve) => launcher.once("exit", resolve));
      process.kill(-(launcher.pid ?? 0), "SIGINT");
      await exited;
      const sql = pgClient(second.url(), { max: 1, onnotice: () => {} });
      const [row] = await sql<{ one: number }[]>`SELECT 1 AS one`;
      await sql.end();
      expect(row?.one).toBe(1);
    } finally {
      await second.stop();
    }
    // The second was the last one using it: its stop stopped it.
    const sql = pgClient(second.url(), { max: 1, connect_timeout: 2, onnotice: () => {} });
    await expect(sql`SELECT 1`).rejects.toThrow();
    await sql.end({ timeout: 1 });
  });

  it("a fresh start (the end-to-end tests') over a server its killed launcher left running stops that server first, then starts anew", async () => {
    const port = await freePort();
    const leftDir = path.join(dir, "left");
    // A launcher killed the hard way (a test runner's SIGKILL) never stopped its server: it is still running.
    const left = await startEmbeddedPostgres({ dataDir: leftDir, port });
    const before = pgClient(left.url(), { max: 1, onnotice: () => {} });
    await before`CREATE TABLE left_behind (id int)`;
    await before.end();
    await removeEmbeddedData(leftDir);
    const fresh = await startEmbeddedPostgres({ dataDir: leftDir, port, ownSession: false });
    try {
      expect(fresh.reused).toBe(false);
      const sql = pgClient(fresh.url(), { max: 1, onnotice: () => {} });
      const [row] = await sql<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'left_behind'`;
      await sql.end();
      expect(row?.n).toBe(0);
    } finally {
      await fresh.stop();
    }
  });

  it("says which port is taken and how to choose another, never 'undefined'", async () => {
    const port = await freePort();
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen({ port, host: "127.0.0.1" }, resolve));
    try {
      const attempt = startEmbeddedPostgres({ dataDir, port });
      await expect(attempt).rejects.toThrow(
        new RegExp(`port ${port} is already in use by another program.*EMBEDDED_PG_PORT`, "s"),
      );
      await expect(attempt).rejects.not.toThrow(/undefined/);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });
});
