import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { processCpuMs } from "../cpu";
import { freePort } from "../free-port";

const FLOOR_SERVER = fileURLToPath(new URL("./floor-server.ts", import.meta.url));
export const FLOOR_USER_ID = "bench-floor";

/** Starts the floor server (./floor-server.ts) on the bench's database and waits until it answers. */
export async function startFloor(databaseUrl: string): Promise<{
  baseUrl: string;
  child: ChildProcess;
  userId: string;
  cpuMs(): number;
  stop(): Promise<void>;
}> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", FLOOR_SERVER], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), FLOOR_USER_ID, DB_POOL_MAX: "20" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error("the floor server exited early");
    try {
      await fetch(`${baseUrl}/`, { method: "POST", body: "{" });
      break;
    } catch {
      if (Date.now() > deadline) throw new Error("the floor server did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    baseUrl,
    child,
    userId: FLOOR_USER_ID,
    cpuMs: () => processCpuMs(child.pid),
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await exited;
    },
  };
}
