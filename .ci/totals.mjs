// Sums vitest and Playwright JSON reports into one closing line: "N passed, N failed".
import { existsSync, readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
for (const file of process.argv.slice(2)) {
  if (!existsSync(file)) {
    console.log(`${file}: missing (the suite did not run)`);
    failed += 1;
    continue;
  }
  const report = JSON.parse(readFileSync(file, "utf8"));
  if (report.stats) {
    // Playwright
    passed += report.stats.expected + report.stats.flaky;
    failed += report.stats.unexpected;
    console.log(`${file}: ${report.stats.expected} passed, ${report.stats.unexpected} failed`);
  } else {
    passed += report.numPassedTests;
    failed += report.numFailedTests + (report.numRuntimeErrorTestSuites ?? 0);
    console.log(`${file}: ${report.numPassedTests} passed, ${report.numFailedTests} failed`);
  }
}
if (passed === 0) failed += 1;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
