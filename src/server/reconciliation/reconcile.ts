import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { GOODS_INVARIANTS } from "./goods";
import type { ReconcileOptions } from "./invariant";
import { MONEY_INVARIANTS } from "./money";
import { ONCE_INVARIANTS } from "./once";
import { type Repair, repairWhatIsSafe } from "./repair";

export type { ReconcileOptions } from "./invariant";

export interface Violation {
  message: string;
  rows: Record<string, unknown>[];
}

export interface InvariantResult {
  name: string;
  description: string;
  violations: Violation[];
}

export interface ReconciliationReport {
  checkedAt: Date;
  ok: boolean;
  invariants: InvariantResult[];
  /** What the periodic run repaired before it checked (./repair.ts); absent from a check that repairs nothing. */
  repairs?: Repair[];
}

/** Every invariant: that each effect happened once, that goods are conserved, that money is. */
const INVARIANTS = [...ONCE_INVARIANTS, ...GOODS_INVARIANTS, ...MONEY_INVARIANTS];

/**
 * Checks every invariant over the whole database and lists what breaks each, with the rows involved. One
 * check at a time, unless `parallel` says how many may run at once (the permutation harness, on a small
 * database, checks after every schedule).
 */
export async function reconcile(
  db: Db,
  options: ReconcileOptions = {},
  { parallel = 1 }: { parallel?: number } = {},
): Promise<ReconciliationReport> {
  const o = {
    lagSeconds: options.lagSeconds ?? 60,
    sampleSize: options.sampleSize ?? 20,
    paymentTimeoutS: options.paymentTimeoutS ?? 900,
  };
  const checks = INVARIANTS.flatMap((invariant) => invariant.checks);
  const found = new Map<(typeof checks)[number], Record<string, unknown>[]>();
  let next = 0;
  const worker = async () => {
    for (let check = checks[next++]; check; check = checks[next++]) {
      const rows = await db.execute<Record<string, unknown>>(
        sql`SELECT * FROM (${check.query(o)}) AS violation LIMIT ${o.sampleSize}`,
      );
      found.set(check, [...rows]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
  const invariants: InvariantResult[] = INVARIANTS.map((invariant) => ({
    name: invariant.name,
    description: invariant.description,
    violations: invariant.checks.flatMap((check) => {
      const rows = found.get(check) ?? [];
      return rows.length > 0 ? [{ message: check.message, rows }] : [];
    }),
  }));
  return { checkedAt: new Date(), ok: invariants.every((i) => i.violations.length === 0), invariants };
}

export function violationCount(report: ReconciliationReport): number {
  return report.invariants.reduce((sum, i) => sum + i.violations.length, 0);
}

/**
 * The full reconciliation for the current period of `everyMin` minutes, run and kept (reconciliation_report)
 * unless another process has already claimed that period: the event worker calls it every few seconds, so
 * that each period is reconciled once per fleet, and every instance's alert log and /api/metrics read the
 * last report (`lastReconciliation`) instead of each reading every order (seconds of database time with a
 * million). The claim is a unique slot, as every business key here: a run that fails gives its slot back for
 * another try; one whose process dies keeps it, and the next period runs. Reports older than a week are
 * pruned. Before it checks, it repairs what is safe to repair (./repair.ts), and the report lists what it
 * repaired: what stays a violation is what it could not. Returns the report, or null when the period was
 * claimed already.
 */
export async function reconcileOncePerPeriod(
  db: Db,
  everyMin: number,
  options: ReconcileOptions = {},
): Promise<ReconciliationReport | null> {
  const sql = db.$client;
  const [claim] = await sql<{ id: string }[]>`
    INSERT INTO reconciliation_report (slot) VALUES (floor(extract(epoch FROM now()) / ${everyMin * 60})::bigint)
    ON CONFLICT (slot) DO NOTHING RETURNING id::text`;
  if (!claim) return null;
  try {
    const started = performance.now();
    const repairs = await repairWhatIsSafe(db, { lagSeconds: options.lagSeconds ?? 60 });
    const report = { ...(await reconcile(db, options)), repairs };
    const invariants = JSON.stringify(report.invariants, (_, value) =>
      typeof value === "bigint" ? value.toString() : value,
    );
    await sql`
      UPDATE reconciliation_report
         SET checked_at = ${report.checkedAt.toISOString()}::timestamptz, took_ms = ${Math.round(performance.now() - started)},
             ok = ${report.ok}, invariants = ${invariants}::jsonb, repairs = ${JSON.stringify(repairs)}::jsonb
       WHERE id = ${claim.id}`;
    await sql`DELETE FROM reconciliation_report WHERE claimed_at < now() - interval '7 days'`;
    return report;
  } catch (error) {
    await sql`DELETE FROM reconciliation_report WHERE id = ${claim.id} AND checked_at IS NULL`.catch(
      () => {},
    );
    throw error;
  }
}

/** The last reconciliation kept by `reconcileOncePerPeriod`, or null when none has finished yet. */
export async function lastReconciliation(db: Db): Promise<ReconciliationReport | null> {
  // Timestamps come back as text from this client (drizzle's setting).
  const [row] = await db.$client<
    { checked_at: string; ok: boolean; invariants: InvariantResult[]; repairs: Repair[] | null }[]
  >`
    SELECT checked_at, ok, invariants, repairs FROM reconciliation_report
     WHERE checked_at IS NOT NULL ORDER BY checked_at DESC LIMIT 1`;
  return row
    ? {
        checkedAt: new Date(row.checked_at),
        ok: row.ok,
        invariants: row.invariants,
        repairs: row.repairs ?? [],
      }
    : null;
}
