/**
 * `npm run model:check`: generates the state machines' half of the SPIN models from the code's tables
 * (./generate.ts), compiles each model with SPIN and gcc, and searches every interleaving exhaustively: once
 * for safety (assertions, invalid end states), then once per LTL property (acceptance cycles, weak fairness).
 * Prints each search's figures (states stored, depth, memory, time) and exits 1 on any violation, with the
 * counterexample told as a story of steps (who did what to which order, payment, refund, key, and the money).
 *
 *   npm run model:check                                  every model as the code is: must pass
 *   npm run model:check -- --model=NAME                  one model (checkout, idempotency)
 *   npm run model:check -- --model=NAME --defect=NAME    one known defect compiled in (each .pml lists its
 *                                                        own; several with commas): must fail, with its trail
 */
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Machine } from "~/server/db/machines";
import { generateModel } from "./generate";

/** One exhaustive search: the safety pass, or one LTL property. */
export interface Search {
  property: string;
  ok: boolean;
  statesStored: number;
  depth: number;
  memoryMb: number;
  seconds: number;
}

export interface ModelCheck {
  model: string;
  ok: boolean;
  /** What pan said was violated, if anything (the first search that failed). */
  violation?: string;
  /** The safety search's figures (the LTL searches are in `searches`). */
  statesStored: number;
  depth: number;
  memoryMb: number;
  seconds: number;
  searches: Search[];
  /** The counterexample, step by step (empty when none). */
  story: string[];
}

/**
 * The models, the LTL properties each declares (`ltl NAME { … }` in the file), and whether their searches need
 * weak fairness: the idempotency model's copies retry in a loop (REQUEST_IN_PROGRESS, sent again) that an
 * unfair scheduler could run forever while the holder never moves; every loop of the checkout model makes
 * progress and every process ends, so its search needs none (and is several times faster without).
 */
export const MODELS = {
  checkout: { file: "model/checkout.pml", ltl: ["order_decided"], fair: false },
  idempotency: {
    file: "model/idempotency.pml",
    ltl: ["everyone_answered", "key_decided", "event_applied"],
    fair: true,
  },
} as const;
export type ModelName = keyof typeof MODELS;

export function checkModel(
  options: {
    model?: ModelName;
    /** One known defect compiled in, or several with commas (each .pml lists its own). */
    defect?: string;
    machines?: readonly Machine<string, string>[];
    /** Search the LTL properties too once safety holds (default: yes). */
    ltl?: boolean;
  } = {},
): ModelCheck {
  const model = options.model ?? "checkout";
  const { file, ltl, fair } = MODELS[model];
  const name = path.basename(file);
  const dir = mkdtempSync(path.join(tmpdir(), `${model}-model-`));
  try {
    copyFileSync(path.resolve(file), path.join(dir, name));
    writeFileSync(path.join(dir, "generated.pml"), generateModel(options.machines));
    const defines = (options.defect?.split(",") ?? []).map((name) => `-D${name}`);
    const run = (command: string, args: string[]) => {
      try {
        return execFileSync(command, args, { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      } catch (error) {
        // What SPIN or gcc said (an inline the model calls that the tables no longer have, say).
        const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
        throw new Error(`${command} ${args.join(" ")} failed:\n${stdout}${stderr}`);
      }
    };
    run("spin", [...defines, "-a", name]);
    // Safety first (no never claim), then each LTL property (with weak fairness where the model needs it).
    // -O0: gcc takes 2 s on pan.c instead of 14 s at -O2, and the searches here are seconds either way.
    run("gcc", ["-O0", "-w", "-DSAFETY", "-DNOCLAIM", "-o", "pan-safety", "pan.c"]);
    const searches = [search(dir, "safety", "./pan-safety", ["-m1000000"])];
    if (searches[0]?.ok && ltl.length > 0 && options.ltl !== false) {
      run("gcc", ["-O0", "-w", "-DNFAIR=8", "-o", "pan-ltl", "pan.c"]);
      for (const property of ltl) {
        const fairness = fair ? ["-f"] : [];
        const found = search(dir, property, "./pan-ltl", ["-a", ...fairness, "-N", property, "-m1000000"]);
        searches.push(found);
        if (!found.ok) break;
      }
    }
    const [safety] = searches as [Search & { out: string }];
    const failed = (searches as (Search & { out: string })[]).find((s) => !s.ok);
    const check: ModelCheck = {
      model,
      ok: !failed,
      statesStored: safety.statesStored,
      depth: safety.depth,
      memoryMb: safety.memoryMb,
      seconds: safety.seconds,
      searches: searches.map(({ out: _out, ...figures }) => figures as Search),
      story: [],
    };
    if (failed) {
      const what = /pan:1: (.*)/.exec(failed.out)?.[1]?.trim() ?? "a violation";
      check.violation = failed.property === "safety" ? what : `${what}: ltl ${failed.property}`;
      check.story = storyOf(run("spin", [...defines, "-t", "-p", name]));
    }
    return check;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function search(dir: string, property: string, pan: string, args: string[]): Search & { out: string } {
  const started = Date.now();
  // pan exits 0 whether or not it found an error; its report says which.
  const result = spawnSync(pan, args, { cwd: dir, encoding: "utf8" });
  const out = `${result.stdout}${result.stderr}`;
  const errors = Number(/errors: (\d+)/.exec(out)?.[1] ?? "-1");
  if (errors < 0) throw new Error(`pan did not report:\n${out}`);
  return {
    property,
    ok: errors === 0,
    statesStored: Number(/(\d+) states, stored/.exec(out)?.[1] ?? 0),
    depth: Number(/depth reached (\d+)/.exec(out)?.[1] ?? 0),
    memoryMb: Number(/([\d.]+)\s+total actual memory usage/.exec(out)?.[1] ?? 0),
    seconds: (Date.now() - started) / 1000,
    out,
  };
}

/** The trail as a story: each step that moved a state machine, money or a key, by whom. */
export function storyOf(trail: string): string[] {
  const story: string[] = [];
  const step = /^\s*(\d+):\s+proc\s+(\d+) \((\w+):\d+\) \S+ \(state \d+\)\s+\[(.*)\]$/;
  /** Actors that run several times at once are told apart by their process number. */
  const many = new Set(["Copy", "Delivery"]);
  for (const line of trail.split("\n")) {
    if (line.includes("START OF CYCLE")) {
      story.push("     from here on it repeats forever");
      continue;
    }
    const m = step.exec(line);
    if (!m) continue;
    const [, n, pid, name, what = ""] = m;
    const who = many.has(name ?? "") ? `${name} ${pid}` : name;
    const tell = (words: string) => story.push(`${n?.padStart(4)} ${who?.padEnd(9)} ${words}`);
    const moved = /^(order|record|(?:pay|refund|trade|consumed)\[[^\]]+\]) = [OPRTIK]_(\w+)$/.exec(what);
    const money = /^(captured|back)\[([^\]]+)\] = /.exec(what);
    if (what === "shipped = 1") tell("the goods are shipped");
    else if (moved) tell(`${nameOf(moved[1] ?? "")} → ${moved[2]}`);
    else if (money) {
      const account = money[1] === "captured" ? "captured on" : "back to the shopper from";
      tell(`money ${account} payment ${money[2]}`);
    } else if (what === "effects = (effects+1)") tell("the key's business writes commit");
    else if (what === "consumerEffects = (consumerEffects+1)") tell("the consumer's effect is applied");
    else if (what === "version = (version+1)") tell("takes a lease (the next lease version)");
    else if (what === "leaseLive = 0" && who === "Clock") tell("the lease runs out");
    else if (what === "crashed = (crashed+1)") tell("dies holding the key");
  }
  return story;
}

function nameOf(variable: string): string {
  const [name, index] = variable.replace("]", "").split("[");
  const noun =
    {
      order: "the order",
      pay: "payment",
      refund: "refund",
      trade: "MockPay's trade",
      record: "the idempotency record",
      consumed: "the consume record",
    }[name ?? ""] ?? name;
  return index === undefined ? (noun ?? "") : `${noun} ${index}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const option = (name: string) =>
    process.argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(`--${name}=`.length);
  const defect = option("defect");
  const only = option("model") as ModelName | undefined;
  if (only && !(only in MODELS)) {
    console.log(`[model] no model ${only}: one of ${Object.keys(MODELS).join(", ")}`);
    process.exit(2);
  }
  let failed = false;
  for (const model of only ? [only] : (Object.keys(MODELS) as ModelName[])) {
    const result = checkModel({ model, defect });
    for (const s of result.searches) {
      console.log(
        `[model] ${model}${defect ? ` with defect ${defect}` : ""}, ${s.property}: ${s.statesStored} states stored, depth ${s.depth}, ${s.memoryMb} MB, ${s.seconds.toFixed(1)} s: ${s.ok ? "no violation" : "VIOLATION"}`,
      );
    }
    if (!result.ok) {
      failed = true;
      console.log(`[model] ${model}: ${result.violation}; the counterexample, step by step:`);
      for (const line of result.story) console.log(`[model]   ${line}`);
    }
  }
  process.exit(failed ? 1 : 0);
}
