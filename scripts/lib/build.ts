import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { buildServer, SERVER_BUNDLE, SERVER_SOURCES } from "./server-bundle";

export const NEXT_BIN = createRequire(import.meta.url).resolve("next/dist/bin/next");
const BUILD_ID = ".next/BUILD_ID";
const LOCK = ".data/build.lock";
/** What Next's build is made from (the core's package too: its pages and jobs compile it in by its path alias). */
const SOURCES = [
  "src",
  "packages/idempotency/src",
  "next.config.ts",
  "package.json",
  "package-lock.json",
  "tsconfig.json",
];

function newestMtime(entry: string): number {
  if (!existsSync(entry)) return 0;
  const stat = statSync(entry);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(entry).reduce(
    (max, name) => Math.max(max, newestMtime(path.join(entry, name))),
    stat.mtimeMs,
  );
}

export function buildIsFresh(): boolean {
  if (!existsSync(BUILD_ID)) return false;
  const built = statSync(BUILD_ID).mtimeMs;
  return SOURCES.every((source) => newestMtime(source) <= built);
}

/** The production server's bundle (./server-bundle.ts) exists, and nothing it is built from changed since. */
export function serverIsFresh(): boolean {
  if (!existsSync(SERVER_BUNDLE)) return false;
  const built = statSync(SERVER_BUNDLE).mtimeMs;
  return SERVER_SOURCES.every((source) => newestMtime(source) <= built);
}

export function runNext(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [NEXT_BIN, ...args], { stdio: "inherit", env });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`next ${args[0]} exited with ${code}`)),
    );
  });
}

/**
 * Builds the app (Next's build, then the production server's bundle) when there is no build or the sources
 * changed since. Several instances starting at once take turns through a lock folder (mkdir is atomic).
 */
export async function ensureBuild(log: (message: string) => void): Promise<void> {
  mkdirSync(path.dirname(LOCK), { recursive: true });
  for (;;) {
    if (buildIsFresh() && serverIsFresh()) return;
    try {
      mkdirSync(LOCK);
    } catch {
      const lockedAt = statSync(LOCK, { throwIfNoEntry: false })?.mtimeMs ?? Date.now();
      // A builder that died leaves its lock behind; no build takes ten minutes.
      if (Date.now() - lockedAt > 10 * 60_000) rmSync(LOCK, { recursive: true, force: true });
      await new Promise((resolve) => setTimeout(resolve, 500));
      continue;
    }
    try {
      if (!buildIsFresh()) {
        log("building the app (next build)…");
        await runNext(["build"], { ...process.env, NEXT_TELEMETRY_DISABLED: "1" });
      }
      if (!serverIsFresh()) {
        log("building the production server (.next/serve)…");
        await buildServer();
      }
      return;
    } finally {
      rmSync(LOCK, { recursive: true, force: true });
    }
  }
}
