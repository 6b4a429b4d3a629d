import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { NEXT_BIN } from "./build";
import { SERVER_BUNDLE, SERVER_ENTRY } from "./server-bundle";

/** TypeScript run by tsx without esbuild's keepNames (./keep-names-off.mjs says why): the bench's own servers. */
export const KEEP_NAMES_OFF = fileURLToPath(new URL("./keep-names-off.mjs", import.meta.url));
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The production server's heap settings. The heap is bounded so an
 * instance stays near its working set under load: young-generation semi-spaces of APP_SEMI_SPACE_MB (4 by
 * default; V8 grows them to 16 MB under allocation pressure) and an old space of APP_HEAP_MB (256; V8
 * collects more eagerly as it nears the limit). Measured in the bench (2,000 keep-alive connections
 * included): peak 274 MB and 1.89 ms of CPU per first execution, against 438 MB and 1.62 ms with V8's
 * defaults (16 and no limit) and 306 MB / 1.79 ms at 8; at 2 the young generation collects so often that
 * CPU per request rises by half. Memory bought with CPU: set 16 where CPU matters more.
 */
const HEAP_ARGS = [
  `--max-semi-space-size=${Number(process.env.APP_SEMI_SPACE_MB ?? 4)}`,
  `--max-old-space-size=${Number(process.env.APP_HEAP_MB ?? 256)}`,
];

/**
 * Node arguments that run the production server: scripts/serve.ts as `npm run build` compiled it
 * (./server-bundle.ts, run by scripts/run-server.mjs), with no TypeScript loader in the process.
 */
export const SERVE_ARGS = [...HEAP_ARGS, SERVER_ENTRY];

/**
 * The production server of the checkout in `dir`: its bundle, or with `fromSource` (or when it has none, as a
 * checkout from before the bundle) its scripts/serve.ts under tsx and this checkout's keepNames hook.
 */
function serveArgsOf(dir: string, fromSource: boolean): string[] {
  const entry = path.join(dir, path.relative(ROOT, SERVER_ENTRY));
  if (!fromSource && existsSync(entry) && existsSync(path.join(dir, path.relative(ROOT, SERVER_BUNDLE)))) {
    return [...HEAP_ARGS, entry];
  }
  return [...HEAP_ARGS, "--import", "tsx", "--import", KEEP_NAMES_OFF, path.join(dir, "scripts", "serve.ts")];
}

/**
 * Environment for the production server's process. glibc's malloc keeps an arena per thread that allocates
 * (V8's helper threads, libuv's pool), up to 8 per core, and each holds freed memory: with two arenas, a default
 * `npm run bench` run peaks lower than with glibc's default, at no CPU the bench can see (docs/benchmark-log.md,
 * "Seventh step", has the figures). Set MALLOC_ARENA_MAX to override.
 */
export const SERVE_ENV = { MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX ?? "2" };

export interface AppProcess {
  baseUrl: string;
  child: ChildProcess;
  /** What the process printed so far (when its output is captured). */
  output(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once: a crash, for fault injection. */
  kill(): Promise<void>;
}

/**
 * Starts the production server (the built app) on 127.0.0.1:`port` with the
 * given environment and waits until it answers.
 */
export async function startAppProcess(options: {
  port: number;
  env: Record<string, string | undefined>;
  /** Keep its output (for error messages) instead of passing it through. */
  capture?: boolean;
  /** `dev`: Next's development server (`npm run dev`) instead of the production server. */
  mode?: "serve" | "dev";
  readyTimeoutMs?: number;
  /** Extra options for node itself (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** A command that runs node, before node's own (e.g. valgrind and its options). */
  wrapper?: string[];
  /** Another checkout's built app instead of this one's (the bench's --app, to compare two commits). */
  dir?: string;
  /** scripts/serve.ts under tsx instead of the bundle `npm run build` made of it. */
  fromSource?: boolean;
}): Promise<AppProcess> {
  const dev = options.mode === "dev";
  const args = [
    ...(options.nodeArgs ?? []),
    ...(dev
      ? [NEXT_BIN, "dev", "-p", String(options.port), "-H", "127.0.0.1"]
      : options.dir || options.fromSource
        ? serveArgsOf(options.dir ?? ROOT, options.fromSource ?? false)
        : SERVE_ARGS),
  ];
  const [command, ...wrapperArgs] = [...(options.wrapper ?? []), process.execPath];
  const child = spawn(command ?? process.execPath, [...wrapperArgs, ...args], {
    ...(options.dir ? { cwd: options.dir } : {}),
    env: {
      ...process.env,
      ...(dev ? {} : SERVE_ENV),
      NODE_ENV: dev ? "development" : "production",
      NEXT_TELEMETRY_DISABLED: "1",
      // No load balancer to tell: a stop closes the listener at once (a test may set its own).
      HTTP_DRAIN_GRACE_MS: "0",
      ...options.env,
      PORT: String(options.port),
      HOST: "127.0.0.1",
    },
    stdio: options.capture ? ["ignore", "pipe", "pipe"] : ["ignore", "ignore", "inherit"],
  });
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseUrl = `http://127.0.0.1:${options.port}`;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the app server exited early:\n${output}`);
    }
    try {
      if ((await fetch(`${baseUrl}/api/trpc/catalog.list`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`the app server did not become ready:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  return {
    baseUrl,
    child,
    output: () => output,
    stop: async (graceMs = 10_000) => {
      if (gone()) return;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(killer);
    },
    kill: async () => {
      if (gone()) return;
      child.kill("SIGKILL");
      await exited;
    },
  };
}
