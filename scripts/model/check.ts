/**
 * `npm run model:check`: generates the state machines' half of the SPIN model from the code's tables
 * (./generate.ts), compiles the model with SPIN and gcc, and searches every interleaving exhaustively.
 * Prints the search's figures (states stored, depth, memory, time) and exits 1 on any violation, with the
 * counterexample told as a story of steps (who did what to which order, payment, refund, and the money).
 *
 *   npm run model:check                        the model as the code is: must pass
 *   npm run model:check -- --defect=NAME       one known defect compiled in (model/checkout.pml lists them):
 *                                              must fail, with its trail
 */
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { generateModel } from "./generate";

export interface ModelCheck {
  ok: boolean;
  /** What pan said was violated, if anything. */
  violation?: string;
  statesStored: number;
  depth: number;
  memoryMb: number;
  seconds: number;
  /** The counterexample, step by step (empty when none). */
  story: string[];
}

const MODEL = path.resolve("model/checkout.pml");

export function checkModel(options: { defect?: string } = {}): ModelCheck {
  const dir = mkdtempSync(path.join(tmpdir(), "checkout-model-"));
  try {
    copyFileSync(MODEL, path.join(dir, "checkout.pml"));
    writeFileSync(path.join(dir, "generated.pml"), generateModel());
    const defines = options.defect ? [`-D${options.defect}`] : [];
    const run = (command: string, args: string[]) =>
      execFileSync(command, args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    run("spin", [...defines, "-a", "checkout.pml"]);
    run("gcc", ["-O2", "-w", "-DSAFETY", "-o", "pan", "pan.c"]);
    const started = Date.now();
    // pan exits 0 whether or not it found an error; its report says which.
    const pan = spawnSync("./pan", ["-m1000000"], { cwd: dir, encoding: "utf8" });
    const out = `${pan.stdout}${pan.stderr}`;
    const errors = Number(/errors: (\d+)/.exec(out)?.[1] ?? "-1");
    const check: ModelCheck = {
      ok: errors === 0,
      statesStored: Number(/(\d+) states, stored/.exec(out)?.[1] ?? 0),
      depth: Number(/depth reached (\d+)/.exec(out)?.[1] ?? 0),
      memoryMb: Number(/([\d.]+)\s+total actual memory usage/.exec(out)?.[1] ?? 0),
      seconds: (Date.now() - started) / 1000,
      story: [],
    };
    if (errors < 0) throw new Error(`pan did not report:\n${out}`);
    if (!check.ok) {
      check.violation = /pan:1: (.*)/.exec(out)?.[1]?.trim() ?? "a violation";
      check.story = storyOf(run("spin", [...defines, "-t", "-p", "checkout.pml"]));
    }
    return check;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The trail as a story: each step that moved a state machine or money, by whom. */
export function storyOf(trail: string): string[] {
  const story: string[] = [];
  const step = /^\s*(\d+):\s+proc\s+\d+ \((\w+):\d+\) \S+ \(state \d+\)\s+\[(.*)\]$/;
  for (const line of trail.split("\n")) {
    const m = step.exec(line);
    if (!m) continue;
    const [, n, who, what = ""] = m;
    const moved = /^(order|(?:pay|refund|trade)\[[^\]]+\]) = [OPRT]_(\w+)$/.exec(what);
    const money = /^(captured|back)\[([^\]]+)\] = /.exec(what);
    if (what === "shipped = 1") story.push(`${n?.padStart(4)} ${who?.padEnd(9)} the goods are shipped`);
    else if (moved) story.push(`${n?.padStart(4)} ${who?.padEnd(9)} ${nameOf(moved[1] ?? "")} → ${moved[2]}`);
    else if (money) {
      const account = money[1] === "captured" ? "captured on" : "back to the shopper from";
      story.push(`${n?.padStart(4)} ${who?.padEnd(9)} money ${account} payment ${money[2]}`);
    }
  }
  return story;
}

function nameOf(variable: string): string {
  const [name, index] = variable.replace("]", "").split("[");
  const noun =
    { order: "the order", pay: "payment", refund: "refund", trade: "MockPay's trade" }[name ?? ""] ?? name;
  return index === undefined ? (noun ?? "") : `${noun} ${index}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const defect = process.argv.find((arg) => arg.startsWith("--defect="))?.slice("--defect=".length);
  const result = checkModel({ defect });
  console.log(
    `[model] ${defect ? `with defect ${defect}: ` : ""}${result.statesStored} states stored, depth ${result.depth}, ${result.memoryMb} MB, ${result.seconds.toFixed(1)} s: ${result.ok ? "no violation" : `VIOLATION: ${result.violation}`}`,
  );
  if (!result.ok) {
    console.log("[model] the counterexample, step by step:");
    for (const line of result.story) console.log(`[model]   ${line}`);
    process.exit(1);
  }
}
