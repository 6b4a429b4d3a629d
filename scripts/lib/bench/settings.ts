/** The benchmark's options (see scripts/bench.ts) and the shape of one result row. */
const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, "").split("=");
    return [k ?? "", v ?? "true"] as const;
  }),
);
export const tiny = args.has("tiny");
/**
 * The shape of a run measured from outside, against the best peer: the order paths only (first executions and
 * replays, the peer in Express), 20 connections, 3 interleaved rounds of 8 s each.
 */
export const outside = args.has("outside");
/** The package's adapters beside the peer in the same framework (./scenarios/adapter-paths.ts), and nothing else. */
export const adapters = args.has("adapters");
/**
 * Whose instructions --instructions counts: floor, peer, app, and a framework's name (express, fastify, hono)
 * for ours by the package's adapter and the peer in that framework.
 */
export const COUNTED_SERVERS = (args.get("servers") ?? "floor,peer,app").split(",");
/** Requests counted per path by --instructions. */
export const COUNTED = Number(args.get("counted") ?? 1600);
/** Another checkout whose built app is measured instead of this one's (to compare two commits with one bench). */
export const APP_DIR = args.get("app");
/** Instructions per request under callgrind (./scenarios/instruction-counts.ts), and nothing else. */
export const instructions = args.has("instructions");
/** Which of the adapters' frameworks run, in this order (default: all of them). */
export const FRAMEWORKS_CHOSEN = args.get("frameworks")?.split(",").filter(Boolean);
export const DURATION = Number(args.get("duration") ?? (tiny ? 1 : outside ? 24 : 10));
export const WARMUP = Number(args.get("warmup") ?? (tiny ? 1 : 3));
export const ROUNDS = Number(args.get("rounds") ?? (tiny ? 1 : 3));
export const CONNECTIONS = Number(args.get("connections") ?? (tiny ? 4 : 20));
export const STORM = Number(args.get("storm") ?? (tiny ? 50 : 500));
export const PROFILE = (args.get("profile") ?? (tiny ? "never" : "on-miss")) as
  | "on-miss"
  | "always"
  | "never";
export const PROFILE_SECONDS = 5;
/** Only these scenarios (their function names), when given. */
export const ONLY =
  args.get("only")?.split(",").filter(Boolean) ??
  (outside ? ["orderPaths"] : adapters ? ["adapterPaths"] : undefined);
export const KEEP_ALIVE = Number(args.get("keep-alive") ?? (tiny ? 200 : 2000));
export const PAID = Number(args.get("orders") ?? (tiny ? 5 : 100));
export const SECRET = "whsec_bench_secret_0123456789abcdefghij";
/** The bench passes its own secrets (the app has no defaults; production mode requires them). */
export const BENCH_SESSION_SECRET = "bench-session-secret-0123456789abcdefghij";
export const BENCH_ADMIN_TOKEN = "bench-admin-token-0123456789abcdefghijklm";

/** One point of a latency distribution: `percentile` % of requests answered within `ms`. */
export interface LatencyPoint {
  percentile: number;
  ms: number;
}

/** What the app's runtime did over one round (./runtime.ts). */
export interface RuntimeWindow {
  /** The event loop's delay over the round: its 99th percentile and its worst. */
  eventLoopP99Ms: number;
  eventLoopMaxMs: number;
  /** Time in GC pauses during the round, and how many. */
  gcMs: number;
  gcPauses: number;
}

export interface Row {
  /** Stable name the ratios find it by. */
  id: string;
  scenario: string;
  requestsPerSec: number;
  /** Requests per second in each interleaved round, in order (rows measured in rounds only). */
  rounds?: number[];
  /** The bench app's runtime in each of those rounds (its own rows only). */
  runtime?: (RuntimeWindow | undefined)[];
  /** CPU per request of the app process(es) (for the floor: this process) and of PostgreSQL. */
  appCpuMs?: number;
  dbCpuMs?: number;
  /** CPU per request of the load generator (this process, autocannon); absent where it is the app. */
  loadCpuMs?: number;
  /** Of appCpuMs, what the app's main thread spent (where the app is one process). */
  appThreadCpuMs?: number;
  p50Ms: number;
  p99Ms: number;
  /** The latency distribution, for the HTML report's chart (absent where a scenario has no latencies). */
  latency?: LatencyPoint[];
  peakRssMb: number | null;
  correctness: string;
  ok: boolean;
}

export const log = (m: string) => console.log(`[bench] ${m}`);
