/** The production server's entry point (src/host/server.ts): `npm run build` compiles it to .next/serve (scripts/lib/server-bundle.ts). */
import "~/host/server";
import { profileOnSignal } from "./lib/profile-on-signal";

// The bench's profiler (scripts/lib/bench/profile.ts): SIGUSR2 starts and stops V8's CPU profiler, so a
// profile covers the load alone, not start-up. Off unless the bench asks for it.
if (process.env.BENCH_PROFILE_DIR) profileOnSignal(process.env.BENCH_PROFILE_DIR);
