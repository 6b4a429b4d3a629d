// Sums every suite's JSON report into one closing line: "N passed, N failed".
// vitest and Playwright reports count their tests; the benchmark counts its correctness checks.
// FAILED_STEPS counts steps that failed before the suites (install, typecheck, lint, build).
import { existsSync, readFileSync } from "node:fs";

let passed = 0;
/** What failed, by name, printed last: CI's log may only be read from its tail. */
const failures = [];
let failed = Number(process.env.FAILED_STEPS ?? 0);
/** The first lines of a failure's message, without colour codes: enough to start from when only the tail survives. */
const why = (message) =>
  String(message ?? "")
    // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes in reporters' messages
    .replace(/\u001b\[[0-9;]*m/g, "")
    .split("\n")
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== "")
    .slice(0, 6)
    .map((line) => `    ${line.slice(0, 300)}`);
for (const file of process.argv.slice(2)) {
  if (!existsSync(file)) {
    console.log(`${file}: missing (the suite did not run)`);
    failed += 1;
    continue;
  }
  const report = JSON.parse(readFileSync(file, "utf8"));
  let ok;
  let bad;
  if (report.stats) {
    ok = report.stats.expected + report.stats.flaky;
    bad = report.stats.unexpected;
    const walk = (suite, titles) => {
      for (const spec of suite.specs ?? []) {
        if (spec.ok) continue;
        failures.push(`${file}: ${[...titles, spec.title].join(" > ")}`);
        const errors = (spec.tests ?? []).flatMap((t) => t.results ?? []).flatMap((r) => r.errors ?? []);
        if (errors[0]) failures.push(...why(errors[0].message));
      }
      for (const child of suite.suites ?? []) walk(child, [...titles, child.title]);
    };
    for (const suite of report.suites ?? []) walk(suite, [suite.title]);
  } else if (Array.isArray(report.rows)) {
    ok = report.rows.filter((row) => row.ok).length;
    bad = report.rows.length - ok;
    for (const row of report.rows.filter((r) => !r.ok)) {
      failures.push(`${file}: ${row.scenario ?? row.id ?? "?"}`);
      for (const line of row.detail ?? []) failures.push(`    ${String(line).slice(0, 400)}`);
    }
  } else {
    ok = report.numPassedTests;
    bad = report.numFailedTests + (report.numRuntimeErrorTestSuites ?? 0);
    for (const result of report.testResults ?? []) {
      const failedTests = (result.assertionResults ?? []).filter((t) => t.status === "failed");
      for (const t of failedTests) {
        failures.push(`${file}: ${result.name} > ${t.fullName}`);
        failures.push(...why(t.failureMessages?.[0]));
      }
      if (failedTests.length === 0 && result.status === "failed") {
        failures.push(`${file}: ${result.name}: ${String(result.message ?? "").slice(0, 300)}`);
      }
    }
  }
  console.log(`${file}: ${ok} passed, ${bad} failed`);
  passed += ok;
  failed += bad;
}
if (failures.length > 0) {
  console.log("failed:");
  for (const line of failures.slice(0, 80)) console.log(`  ${line}`);
}
if (passed === 0) failed += 1;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
