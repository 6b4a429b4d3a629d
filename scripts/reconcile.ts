/**
 * `npm run reconcile`: checks every invariant over the database; exits 1 if any is broken.
 *   --repair   first repairs what is safe to repair (src/server/reconciliation/repair.ts), as the worker's
 *              periodic run does, and lists it
 */
import { getEnv } from "~/env";
import { closeDb, createDb } from "~/server/db/client";
import { reconcile, violationCount } from "~/server/reconciliation/reconcile";
import { repairWhatIsSafe } from "~/server/reconciliation/repair";
import { assertDriverPatched } from "~/shared/postgres-driver";
import { exitWith } from "./lib/exit";

// Refuses to run on a postgres.js installed without our patch (npm ci --ignore-scripts), naming the fix.
assertDriverPatched();

const env = getEnv();
const db = createDb(env.databaseUrl, { max: 2 });
let code = 0;
try {
  if (process.argv.includes("--repair")) {
    const repairs = await repairWhatIsSafe(db);
    for (const repair of repairs) console.log(`repaired: ${JSON.stringify(repair)}`);
    console.log(`${repairs.length} repair(s)`);
  }
  const report = await reconcile(db, { paymentTimeoutS: env.ORDER_PAYMENT_TIMEOUT_S });
  for (const invariant of report.invariants) {
    const mark = invariant.violations.length === 0 ? "ok  " : "FAIL";
    console.log(`${mark} ${invariant.name}: ${invariant.description}`);
    for (const violation of invariant.violations) {
      console.log(`     ✗ ${violation.message} (${violation.rows.length} shown)`);
      for (const row of violation.rows) console.log(`       ${JSON.stringify(row)}`);
    }
  }
  const broken = violationCount(report);
  console.log(broken === 0 ? "reconciled: no violation" : `${broken} violation(s)`);
  code = broken === 0 ? 0 : 1;
} catch (error) {
  console.error(
    `could not reconcile ${env.DATABASE_URL ? "DATABASE_URL" : `the embedded database on port ${env.EMBEDDED_PG_PORT} (is \`npm start\` running?)`}:`,
    error,
  );
  code = 2;
} finally {
  await closeDb(db).catch(() => {});
}
exitWith(code);
