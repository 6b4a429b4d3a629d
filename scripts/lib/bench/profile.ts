import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { SourceMap } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { orderLoad, restToken, run, sessionCookie, startApp, type Transport } from "./load";
import { log } from "./settings";

interface CallFrame {
  functionName: string;
  url: string;
  /** Zero-based, as V8 gives them. */
  lineNumber: number;
  columnNumber?: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * Where the time goes on one path: a fresh app instance (so the measured runs are not slowed by the
 * profiler) is warmed up, then V8's CPU profiler runs while the path's load does (scripts/serve.ts starts
 * and stops it on SIGUSR2), and the profile is summed by where the code lives (our modules, each package,
 * node's internals, GC). Printed when a ratio is missed.
 */
export async function profilePath(
  databaseUrl: string,
  kind: "trpc" | "rest",
  replay: boolean,
  seconds: number,
): Promise<string[]> {
  const dir = path.resolve("bench-results", `profile-${kind}${replay ? "-replay" : ""}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const app = await startApp(databaseUrl, { BENCH_PROFILE_DIR: dir });
  try {
    const transport: Transport =
      kind === "rest"
        ? { kind: "rest", token: (await restToken(app.baseUrl)).token }
        : { kind: "trpc", cookie: await sessionCookie(app.baseUrl) };
    const keys = Array.from({ length: replay ? 200 : 200_000 }, () => crypto.randomUUID());
    // Warm up (and, for replays, make the keys) before the profiler starts: start-up is not the question.
    await run({ ...orderLoad(app.baseUrl, transport, keys, 0, null), duration: 3 });
    log(`profiling ${kind}${replay ? " replays" : " first executions"} for ${seconds}s`);
    app.child.kill("SIGUSR2");
    await run({ ...orderLoad(app.baseUrl, transport, keys, replay ? 0 : 100_000, null), duration: seconds });
    app.child.kill("SIGUSR2");
    for (let i = 0; i < 50 && !existsSync(path.join(dir, "cpu.cpuprofile")); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    await app.stop();
  }
  const file = readdirSync(dir).find((name) => name.endsWith(".cpuprofile"));
  if (!file) return ["(no profile was written)"];
  const lines = summarise(JSON.parse(readFileSync(path.join(dir, file), "utf8")) as CpuProfile, dir);
  const heap = path.join(dir, "heap.heapprofile");
  if (existsSync(heap))
    lines.push(...summariseAllocations(JSON.parse(readFileSync(heap, "utf8")) as HeapProfile));
  return lines;
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapNode[];
}
interface HeapProfile {
  head: HeapNode;
}

/**
 * What the profiled load allocated, by the function that allocated it (V8's sampling heap profiler: the
 * bytes of the objects sampled, alive or not). Garbage is the young generation's work: every byte here is
 * scavenged.
 */
export function summariseAllocations(profile: HeapProfile): string[] {
  const functions = new Map<string, number>();
  const places = new Map<string, number>();
  let total = 0;
  const visit = (node: HeapNode) => {
    const frame = sourceFrame(node.callFrame);
    if (node.selfSize > 0) {
      total += node.selfSize;
      const name = `${frame.functionName || "(anonymous)"} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
      functions.set(name, (functions.get(name) ?? 0) + node.selfSize);
      const place = placeOf(frame.url, frame.functionName);
      places.set(place, (places.get(place) ?? 0) + node.selfSize);
    }
    for (const child of node.children) visit(child);
  };
  visit(profile.head);
  const top = (m: Map<string, number>, n: number) => topShares(m, n, total);
  return [
    `allocated ${(total / 2 ** 20).toFixed(0)} MB (sampled); by place:`,
    ...top(places, 10),
    "allocating most (self):",
    ...top(functions, 16),
  ];
}

/** Self time by place (package, our folder, node, GC) and the heaviest functions, as lines to print. */
export function summarise(profile: CpuProfile, dir: string): string[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const places = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  for (const [id, micros] of self) {
    const compiled = byId.get(id)?.callFrame;
    if (!compiled || compiled.functionName === "(idle)") continue;
    const frame = sourceFrame(compiled);
    busy += micros;
    const place = placeOf(frame.url, frame.functionName);
    places.set(place, (places.get(place) ?? 0) + micros);
    const name = `${frame.functionName || "(anonymous)"} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
  }
  const top = (m: Map<string, number>, n: number) => topShares(m, n, busy);
  return [
    `busy ${(busy / 1000).toFixed(0)} ms of CPU; self time by place:`,
    ...top(places, 14),
    "heaviest functions (self time):",
    ...top(functions, 12),
    `(the whole profile: ${path.relative(process.cwd(), dir)}; open it in Chrome DevTools)`,
  ];
}

/** The `n` largest entries of `m`, each as its share of `total`, one line each. */
function topShares(m: Map<string, number>, n: number, total: number): string[] {
  return [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, amount]) => `  ${((amount / Math.max(1, total)) * 100).toFixed(1).padStart(5)} %  ${name}`);
}

const sourceMaps = new Map<string, SourceMap | undefined>();

/**
 * A frame of the production server's bundle (.next/serve/server.mjs, scripts/lib/server-bundle.ts) as the
 * TypeScript it was compiled from, read through the bundle's source map; any other frame as it is.
 */
export function sourceFrame(frame: CallFrame): CallFrame {
  if (!frame.url.startsWith("file:") || !frame.url.includes("/.next/serve/")) return frame;
  if (!sourceMaps.has(frame.url)) {
    const file = `${fileURLToPath(frame.url)}.map`;
    sourceMaps.set(
      frame.url,
      existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, "utf8"))) : undefined,
    );
  }
  const entry = sourceMaps.get(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber ?? 0);
  if (!entry || !("originalSource" in entry) || !entry.originalSource) return frame;
  return { ...frame, url: new URL(entry.originalSource, frame.url).href, lineNumber: entry.originalLine };
}

function placeOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  if (url.startsWith("node:")) return "node internals";
  const modules = url.lastIndexOf("node_modules/");
  if (modules >= 0) {
    const rest = url.slice(modules + "node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  const src = url.indexOf("/src/");
  if (src >= 0)
    return `ours: ${url
      .slice(src + 1)
      .split("/")
      .slice(0, 3)
      .join("/")}`;
  return shortUrl(url);
}

function shortUrl(url: string): string {
  const modules = url.lastIndexOf("node_modules/");
  if (modules >= 0) return url.slice(modules + "node_modules/".length);
  const src = url.indexOf("/src/");
  return src >= 0 ? url.slice(src + 1) : url;
}
