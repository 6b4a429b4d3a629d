import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";

/**
 * SIGUSR2 starts V8's CPU profiler and its sampling heap profiler in this process; the next SIGUSR2 writes
 * `<dir>/cpu.cpuprofile` and `<dir>/heap.heapprofile` (what was allocated meanwhile, by where).
 */
export function profileOnSignal(dir: string): void {
  const session = new Session();
  session.connect();
  let running = false;
  process.on("SIGUSR2", () => {
    void (async () => {
      if (!running) {
        running = true;
        await session.post("Profiler.enable");
        await session.post("Profiler.setSamplingInterval", { interval: 500 });
        await session.post("Profiler.start");
        await session.post("HeapProfiler.enable");
        await session.post("HeapProfiler.startSampling", {
          samplingInterval: 16_384,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
        return;
      }
      running = false;
      const { profile: heap } = await session.post("HeapProfiler.stopSampling");
      writeFileSync(path.join(dir, "heap.heapprofile"), JSON.stringify(heap));
      const { profile } = await session.post("Profiler.stop");
      writeFileSync(path.join(dir, "cpu.cpuprofile"), JSON.stringify(profile));
    })();
  });
}
