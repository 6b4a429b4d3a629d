// Sums every suite's JSON report into one closing line: "N passed, N failed".
// vitest and Playwright reports count their tests; the benchmark counts its correctness checks.
// FAILED_STEPS counts steps that failed before the suites (install, typecheck, lint, build).
import { existsSync, readFileSync } from "node:fs";

let passed = 0;
let failed = Number(process.env.FAILED_STEPS ?? 0);
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
  } else if (Array.isArray(report.rows)) {
    ok = report.rows.filter((row) => row.ok).length;
    bad = report.rows.length - ok;
  } else {
    ok = report.numPassedTests;
    bad = report.numFailedTests + (report.numRuntimeErrorTestSuites ?? 0);
  }
  console.log(`${file}: ${ok} passed, ${bad} failed`);
  passed += ok;
  failed += bad;
}
if (passed === 0) failed += 1;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
