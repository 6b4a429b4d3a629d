import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";

/** SIGUSR2 starts V8's CPU profiler in this process; the next SIGUSR2 writes `<dir>/cpu.cpuprofile`. */
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
        return;
      }
      running = false;
      const { profile } = await session.post("Profiler.stop");
      writeFileSync(path.join(dir, "cpu.cpuprofile"), JSON.stringify(profile));
    })();
  });
}
