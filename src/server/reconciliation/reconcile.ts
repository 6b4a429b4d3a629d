import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { GOODS_INVARIANTS } from "./goods";
import type { ReconcileOptions } from "./invariant";
import { MONEY_INVARIANTS } from "./money";
import { ONCE_INVARIANTS } from "./once";

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
}

/** Every invariant: that each effect happened once, that goods are conserved, that money is. */
const INVARIANTS = [...ONCE_INVARIANTS, ...GOODS_INVARIANTS, ...MONEY_INVARIANTS];

/** Checks every invariant over the whole database and lists what breaks each, with the rows involved. */
export async function reconcile(db: Db, options: ReconcileOptions = {}): Promise<ReconciliationReport> {
  const o = {
    lagSeconds: options.lagSeconds ?? 60,
    sampleSize: options.sampleSize ?? 20,
    paymentTimeoutS: options.paymentTimeoutS ?? 900,
  };
  const invariants: InvariantResult[] = [];
  for (const invariant of INVARIANTS) {
    const violations: Violation[] = [];
    for (const check of invariant.checks) {
      const rows = await db.execute<Record<string, unknown>>(
        sql`SELECT * FROM (${check.query(o)}) AS violation LIMIT ${o.sampleSize}`,
      );
      if (rows.length > 0) violations.push({ message: check.message, rows: [...rows] });
    }
    invariants.push({ name: invariant.name, description: invariant.description, violations });
  }
  return { checkedAt: new Date(), ok: invariants.every((i) => i.violations.length === 0), invariants };
}

export function violationCount(report: ReconciliationReport): number {
  return report.invariants.reduce((sum, i) => sum + i.violations.length, 0);
}
