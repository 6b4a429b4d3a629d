import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * valgrind's callgrind as the bench uses it (./scenarios/instruction-counts.ts): a process runs under it with
 * counting off, and is told when to count, when to start again from zero and when to write what it counted.
 */

/** The command that runs a process under callgrind, counting off, its dumps written as `<dir>/<name>.out.<n>`. */
export function callgrindWrapper(dir: string, name: string): string[] {
  return [
    "valgrind",
    "--tool=callgrind",
    // V8 writes the code it runs: valgrind must see every write to code, not only to the stack's.
    "--smc-check=all-non-file",
    "--instr-atstart=no",
    `--callgrind-out-file=${path.join(dir, `${name}.out`)}`,
  ];
}

/**
 * One command to the process under callgrind. valgrind names the pipe it listens on by the process's LOGNAME (or
 * USER) and HOST (or HOSTNAME), and callgrind_control looks for it by its own: the command is sent with the
 * process's (the app's HOST is the address it binds).
 */
export function callgrind(pid: number, command: string): void {
  const names = ["LOGNAME", "USER", "HOST", "HOSTNAME"];
  const theirs = Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)])
      .filter(([name]) => names.includes(name ?? "")),
  );
  const env = { ...process.env };
  for (const name of names) delete env[name];
  const said = execFileSync("callgrind_control", [command, String(pid)], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...env, ...theirs },
    // What it says on stderr ("sending command …") is not news. Its stdout names the process it found; a
    // command that reached no process is caught by the dump that does not come (countWhile).
    stdio: ["ignore", "pipe", "ignore"],
  });
  if (!/OK/.test(said)) throw new Error(`callgrind_control ${command} ${pid}: ${said}`);
}

/** Instructions by what ran them: V8's compilers, its collector, and everything else (the work itself). */
export interface Counts {
  total: number;
  compiling: number;
  collecting: number;
}

/**
 * What kind of work a function of the process is, by its name (callgrind_annotate's `file:function`): V8's
 * parsers and compilers (code still being compiled or optimised: warm-up, not the request), its garbage
 * collector (the request's allocations, paid later), or the rest.
 */
export function kindOf(fn: string): keyof Omit<Counts, "total"> | "rest" {
  if (
    /compiler::|[Mm]aglev|[Tt]urboshaft|interpreter::|::Parser|::Scanner|Compile|BytecodeGenerator|::Zone/.test(
      fn,
    )
  )
    return "compiling";
  if (
    /Marking|Scaveng|Sweep|Heap::|heap::|MemoryChunk|Evacuat|Compactor|RememberedSet|SlotSet|MarkCompact|IteratePointers|SizeFromMap/.test(
      fn,
    )
  )
    return "collecting";
  return "rest";
}

/** A dump's instructions, summed by kind (`kindOf`) over its functions. */
export function countsOf(file: string): Counts {
  const annotated = execFileSync("callgrind_annotate", ["--threshold=100", file], {
    encoding: "utf8",
    maxBuffer: 256 * 2 ** 20,
  });
  const counts: Counts = { total: 0, compiling: 0, collecting: 0 };
  for (const line of annotated.split("\n")) {
    const match = line.match(/^\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$/);
    if (!match?.[1] || !match[2] || match[2].includes("PROGRAM TOTALS")) continue;
    const instructions = Number(match[1].replaceAll(",", ""));
    counts.total += instructions;
    const kind = kindOf(match[2]);
    if (kind !== "rest") counts[kind] += instructions;
  }
  return counts;
}

/** The newest dump of `name` (callgrind numbers them `<file>.<n>`). */
function newestDump(dir: string, name: string): { n: number; file: string } | undefined {
  const newest = readdirSync(dir)
    .map((file) => ({ file, n: Number(file.match(new RegExp(`^${name}\\.out\\.(\\d+)$`))?.[1]) }))
    .filter((dump) => Number.isFinite(dump.n))
    .sort((a, b) => b.n - a.n)[0];
  return newest && { n: newest.n, file: path.join(dir, newest.file) };
}

/**
 * The instructions the process under callgrind (`name`'s, dumping into `dir`) executes while `work` runs, by
 * kind. A dump that did not come is an error, never the last one read again.
 */
export async function countWhile(
  pid: number,
  dir: string,
  name: string,
  work: () => Promise<void>,
): Promise<Counts> {
  const before = newestDump(dir, name)?.n ?? 0;
  callgrind(pid, "--instr=on");
  callgrind(pid, "--zero");
  await work();
  callgrind(pid, "--dump");
  callgrind(pid, "--instr=off");
  const dump = newestDump(dir, name);
  if (!dump || dump.n <= before) throw new Error(`${name}: callgrind wrote no dump`);
  return countsOf(dump.file);
}
