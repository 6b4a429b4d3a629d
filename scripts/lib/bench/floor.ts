import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import { KEEP_NAMES_OFF } from "../app-process";
import { CpuMeter, mainThreadCpuMs, ownCpuMs, processCpuMs } from "../cpu";
import { freePort } from "../free-port";

const FLOOR_SERVER = fileURLToPath(new URL("./floor-server.ts", import.meta.url));
const PEER_SERVER = fileURLToPath(new URL("./peer-server.ts", import.meta.url));
const ADAPTER_SERVER = fileURLToPath(new URL("./adapter-server.ts", import.meta.url));
export const FLOOR_USER_ID = "bench-floor";
export const PEER_USER_ID = "bench-peer";
export const ADAPTER_USER_ID = "bench-adapter";
/** The frameworks the package has adapters for, each benched against the peer in the same framework. */
export const FRAMEWORKS = ["express", "fastify", "hono"] as const;
export type Framework = (typeof FRAMEWORKS)[number];

export interface BenchServer {
  baseUrl: string;
  child: ChildProcess;
  userId: string;
  cpuMs(): number;
  stop(): Promise<void>;
}

/** Starts the floor server (./floor-server.ts) on the bench's database and waits until it answers. */
export function startFloor(databaseUrl: string, wrapper?: string[]): Promise<BenchServer> {
  return startServer(
    "floor",
    FLOOR_SERVER,
    FLOOR_USER_ID,
    { DATABASE_URL: databaseUrl, FLOOR_USER_ID },
    wrapper,
  );
}

/** Starts the peer (./peer-server.ts: @node-idempotency with Redis, in Express by default) on its own database. */
export function startPeer(
  databaseUrl: string,
  redisUrl: string,
  framework = "express",
  wrapper?: string[],
): Promise<BenchServer> {
  return startServer(
    `${framework} peer`,
    PEER_SERVER,
    PEER_USER_ID,
    { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, FRAMEWORK: framework },
    wrapper,
  );
}

/** Starts ours in `framework` by the package's adapter (./adapter-server.ts) on its own database. */
export function startAdapter(
  databaseUrl: string,
  framework: string,
  wrapper?: string[],
): Promise<BenchServer> {
  return startServer(
    `${framework} adapter`,
    ADAPTER_SERVER,
    ADAPTER_USER_ID,
    { DATABASE_URL: databaseUrl, FRAMEWORK: framework },
    wrapper,
  );
}

async function startServer(
  name: string,
  script: string,
  userId: string,
  env: Record<string, string>,
  /** A command that runs node, before node's own (valgrind, for ./scenarios/instruction-counts.ts). */
  wrapper: string[] = [],
): Promise<BenchServer> {
  const port = await freePort();
  const [command, ...wrapperArgs] = [...wrapper, process.execPath];
  const child = spawn(
    command ?? process.execPath,
    [...wrapperArgs, "--import", "tsx", "--import", KEEP_NAMES_OFF, script],
    {
      env: { ...process.env, ...env, PORT: String(port), DB_POOL_MAX: "20" },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (wrapper.length > 0 ? 600_000 : 30_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the ${name} server exited early`);
    try {
      await fetch(`${baseUrl}/`, { method: "POST", body: "{" });
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`the ${name} server did not start`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    baseUrl,
    child,
    userId,
    cpuMs: () => processCpuMs(child.pid),
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** CPU per request of a bench server of its own (the floor, a peer, an adapter), beside the load generator's. */
export function serverMeter(server: Pick<BenchServer, "child">): CpuMeter {
  return new CpuMeter(
    () => processCpuMs(server.child.pid),
    ownCpuMs,
    () => mainThreadCpuMs(server.child.pid),
  );
}

/** Whether a Redis answers PING at `url` within a second (the peer's store). */
export function redisAnswers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port || 6379), hostname || "127.0.0.1");
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => done(data.toString().startsWith("+PONG")));
  });
}
