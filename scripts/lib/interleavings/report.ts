import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Exploration, ScheduleRun } from "./explore";

export interface PairResult extends Exploration {
  name: string;
  bound: number;
  seconds: number;
}

/** A statement as a reader recognises it: its first line, its whitespace folded, cut at 110 characters. */
export function shortStatement(text: string): string {
  const folded = text.replace(/\s+/g, " ").trim();
  return folded.length > 110 ? `${folded.slice(0, 107)}...` : folded;
}

/** A schedule told step by step: who sent what, what it answered, which waited on a lock; then what was wrong. */
export function describeRun(run: ScheduleRun, problems: string[]): string {
  const width = Math.max(...run.trace.map((step) => step.actor.length));
  const lines = run.trace.map(
    (step, i) =>
      `    ${String(i + 1).padStart(3)}. ${step.actor.padEnd(width)}  ${shortStatement(step.text)}` +
      `  -> ${step.outcome || "?"}${step.blocked ? " (waited on a lock)" : ""}`,
  );
  const answers = run.answers.map(
    (answer) =>
      `    ${answer.name} answered ${answer.ok ? "ok" : `an error: ${(answer.value as { code?: string })?.code ?? String(answer.value)}`}`,
  );
  return ["  the first bad schedule:", ...lines, ...answers, ...problems.map((p) => `    wrong: ${p}`)].join(
    "\n",
  );
}

export function printSummary(results: PairResult[], seconds: number) {
  const schedules = results.reduce((sum, r) => sum + r.schedules, 0);
  const bad = results.reduce((sum, r) => sum + r.bad.length, 0);
  const capped = results.filter((r) => r.capped).length;
  console.log(
    `\ninterleavings: ${results.length} pairs, ${schedules} schedules, ${bad} bad` +
      `${capped ? `, ${capped} pairs capped` : ""}, ${seconds.toFixed(0)} s`,
  );
}

/** One row per pair, as CI's totals read them (.ci/totals.mjs): ok, its name, and the first bad schedule told. */
export function writeReport(file: string, results: PairResult[]) {
  mkdirSync(path.dirname(file), { recursive: true });
  const rows = results.map((r) => ({
    scenario: `interleavings: ${r.name}`,
    ok: r.bad.length === 0,
    schedules: r.schedules,
    bound: r.bound,
    capped: r.capped,
    bad: r.bad.length,
    seconds: Math.round(r.seconds * 10) / 10,
    detail: r.bad[0] ? describeRun(r.bad[0].run, r.bad[0].problems).split("\n").slice(0, 60) : [],
  }));
  writeFileSync(file, `${JSON.stringify({ rows }, null, 2)}\n`);
}
