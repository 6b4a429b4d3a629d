import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { callgrindWrapper, countWhile } from "../scripts/lib/bench/callgrind";
import { freePort } from "../scripts/lib/free-port";

// What `npm run bench -- --instructions` rests on: a server under callgrind, counted only while told to, and
// its counts in proportion to the work its requests ask for. The server's HOST is set, as the app's is (the
// address it binds), because valgrind names the pipe it is told through by it.
const SERVER = `
const http = require("node:http");
http.createServer((req, res) => {
  const n = Number(new URL(req.url, "http://localhost").searchParams.get("n"));
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003;
  res.end(String(s));
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));`;

const dir = mkdtempSync(path.join(tmpdir(), "callgrind-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("counts a server's instructions while told to, in proportion to the work of its requests", async () => {
  const port = await freePort();
  const [command = "valgrind", ...args] = [...callgrindWrapper(dir, "probe"), process.execPath, "-e", SERVER];
  const child = spawn(command, args, {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("ready")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`the server exited (${code}) before it listened`)));
    });
    const pid = child.pid ?? 0;
    const requests = (n: number) => async () => {
      for (let i = 0; i < 5; i++) await (await fetch(`http://127.0.0.1:${port}/?n=${n}`)).text();
    };
    await requests(100_000)(); // warm-up, not counted
    const light = (await countWhile(pid, dir, "probe", requests(100_000))).total;
    const heavy = (await countWhile(pid, dir, "probe", requests(400_000))).total;
    // The loop alone: 5 × 100,000 turns of several instructions each.
    expect(light).toBeGreaterThan(2_000_000);
    // Four times the loop, and the same HTTP around it: more than twice, less than four and a half times.
    expect(heavy / light).toBeGreaterThan(2);
    expect(heavy / light).toBeLessThan(4.5);
  } finally {
    child.kill("SIGKILL");
  }
}, 120_000);
