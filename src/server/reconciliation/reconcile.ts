import { sql } from "drizzle-orm";
import type { Db, Tx } from "~/server/db/client";
import type { ReconciliationKind } from "~/server/db/schema";
import { GOODS_INVARIANTS } from "./goods";
import type { Check, ReconcileOptions } from "./invariant";
import { MONEY_INVARIANTS } from "./money";
import { ONCE_INVARIANTS } from "./once";
import { type Repair, repairWhatIsSafe } from "./repair";
import {
  EVERY_ORDER,
  type OrderKey,
  ordersTouchedSince,
  SCOPE_TABLE,
  type Scope,
  withScopeTable,
} from "./scope";

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
  /** Which run kept it (absent from a check run on its own). */
  kind?: ReconciliationKind;
  /** The orders an incremental run checked (absent: every order). */
  ordersChecked?: number;
  /** Every order the violations name (the rows are a sample), up to 10,000 per check. */
  openOrders?: OrderKey[];
  /** How long the kept run took. */
  tookMs?: number;
}

/** Every invariant: that each effect happened once, that goods are conserved, that money is. */
const INVARIANTS = [...ONCE_INVARIANTS, ...GOODS_INVARIANTS, ...MONEY_INVARIANTS];
const CHECKS = new Map(
  INVARIANTS.flatMap((i) => i.checks.map((check) => [`${i.name}\n${check.message}`, check])),
);

/**
 * Checks every invariant and lists what breaks each, with the rows involved: over the whole database, or, given
 * `orders`, over those orders only (checks marked `whole` still read everything: ./invariant.ts). One check at
 * a time, unless `parallel` says how many may run at once (an incremental run takes two; the permutation harness,
 * on a small database, checks after every schedule).
 */
export async function reconcile(
  db: Db,
  options: ReconcileOptions = {},
  { parallel = 1, orders }: { parallel?: number; orders?: readonly OrderKey[] } = {},
): Promise<ReconciliationReport> {
  const thresholds = {
    lagSeconds: options.lagSeconds ?? 60,
    sampleSize: options.sampleSize ?? 20,
    paymentTimeoutS: options.paymentTimeoutS ?? 900,
  };
  const checks = INVARIANTS.flatMap((invariant) => invariant.checks).filter(
    // No order to check: only what is checked over everything.
    (check) => check.whole || !orders || orders.length > 0,
  );
  const found = new Map<Check, Record<string, unknown>[]>();
  const open = new Map<string, OrderKey>();
  let next = 0;
  /** Takes the next check until none is left (several of these share the list). */
  const worker = async (run: Db | Tx, scope: Scope) => {
    const o = { ...thresholds, scope };
    for (let check = checks[next++]; check; check = checks[next++]) {
      const rows = await run.execute<Record<string, unknown>>(
        sql`SELECT * FROM (${check.query(o)}) AS violation LIMIT ${o.sampleSize}`,
      );
      found.set(check, [...rows]);
      for (const key of keysOf(rows)) open.set(`${key.userId}\n${key.orderId}`, key);
      // More than the sample: every order it names, for the next incremental runs to check again.
      if (!check.whole && rows.length >= o.sampleSize) {
        const all = await run.execute<Record<string, unknown>>(
          sql`SELECT DISTINCT user_id, order_id FROM (${check.query(o)}) AS violation LIMIT ${OPEN_ORDERS_MAX}`,
        );
        for (const key of keysOf([...all])) open.set(`${key.userId}\n${key.orderId}`, key);
      }
    }
  };
  const workers = Array.from({ length: Math.max(1, parallel) });
  // Given orders, each worker holds them in a transaction of its own.
  if (orders)
    await Promise.all(workers.map(() => withScopeTable(db, orders, (tx) => worker(tx, SCOPE_TABLE))));
  else await Promise.all(workers.map(() => worker(db, EVERY_ORDER)));
  const invariants: InvariantResult[] = INVARIANTS.map((invariant) => ({
    name: invariant.name,
    description: invariant.description,
    violations: invariant.checks.flatMap((check) => {
      const rows = found.get(check) ?? [];
      return rows.length > 0 ? [{ message: check.message, rows }] : [];
    }),
  }));
  return {
    checkedAt: new Date(),
    ok: invariants.every((i) => i.violations.length === 0),
    invariants,
    openOrders: [...open.values()],
    ...(orders ? { ordersChecked: orders.length } : {}),
  };
}

/** At most this many orders a check names are kept for the next runs (beyond: the next full run finds them). */
const OPEN_ORDERS_MAX = 10_000;

/** The orders rows name (`user_id` and `order_id`). */
const keysOf = (rows: Record<string, unknown>[]): OrderKey[] =>
  rows.flatMap((row) =>
    typeof row.user_id === "string" && typeof row.order_id === "string"
      ? [{ userId: row.user_id, orderId: row.order_id }]
      : [],
  );

export function violationCount(report: ReconciliationReport): number {
  return report.invariants.reduce((sum, i) => sum + i.violations.length, 0);
}

/**
 * What an incremental run checks: the orders touched at or after `since`, and every order named by the reports
 * kept since then (so that a violation stays in the report until it is gone, not only until its order stops
 * moving; and one found by a run that overlapped another is not lost to the other's report).
 */
export async function ordersToCheck(db: Db, since: Date): Promise<OrderKey[]> {
  const reports = await db.$client<{ open_orders: OrderKey[] | null }[]>`
    SELECT open_orders FROM reconciliation_report WHERE checked_at >= ${since.toISOString()}::timestamptz`;
  const orders = new Map<string, OrderKey>();
  for (const key of [
    ...(await ordersTouchedSince(db, since)),
    ...reports.flatMap((r) => r.open_orders ?? []),
  ])
    orders.set(`${key.userId}\n${key.orderId}`, key);
  return [...orders.values()];
}

/**
 * An incremental reconciliation of `orders` (`ordersToCheck`). Rows of the last report that name no order, from
 * a check that does not read everything, cannot be checked again here: they are kept as they were until a full
 * run.
 */
export async function reconcileTouched(
  db: Db,
  orders: readonly OrderKey[],
  previous: ReconciliationReport | null,
  options: ReconcileOptions = {},
): Promise<ReconciliationReport> {
  const report = await reconcile(db, options, { orders, parallel: 2 });
  for (const invariant of previous?.invariants ?? []) {
    const now = report.invariants.find((i) => i.name === invariant.name);
    for (const violation of invariant.violations) {
      if (CHECKS.get(`${invariant.name}\n${violation.message}`)?.whole) continue;
      const unchecked = violation.rows.filter(
        (row) => !(typeof row.user_id === "string" && typeof row.order_id === "string"),
      );
      if (!now || unchecked.length === 0) continue;
      const same = now.violations.find((v) => v.message === violation.message);
      if (same) same.rows.push(...unchecked.filter((row) => !same.rows.some((r) => sameRow(r, row))));
      else now.violations.push({ message: violation.message, rows: unchecked });
    }
  }
  return { ...report, ok: report.invariants.every((i) => i.violations.length === 0) };
}

const sameRow = (a: Record<string, unknown>, b: Record<string, unknown>) =>
  JSON.stringify(a, bigintAsText) === JSON.stringify(b, bigintAsText);
const bigintAsText = (_: string, value: unknown) => (typeof value === "bigint" ? value.toString() : value);

/** How the worker's runs are spaced: an incremental run every `everyMin`, a full one every `fullEveryMin`. */
export interface ReconcilePeriods {
  everyMin: number;
  fullEveryMin: number;
}

/**
 * How far back an incremental run looks before the start of the last run kept: an order is checked only once it
 * has stood still for the lag, so a run must see again what moved within the lag before the last one; and a
 * transaction that touched an order commits after it appended its touch. (A transaction longer than this is
 * checked by the next full run.)
 */
const OVERLAP_S = 60;

/**
 * The reconciliation due now, run and kept (reconciliation_report) unless another process has claimed it
 * already. The event worker calls it every few seconds, so that each run happens once per fleet, and every
 * instance's alert log, /admin and /api/metrics read the last report (`lastReconciliation`) instead of each
 * reading every order. Due, in this order: a full run a person asked for ("Reconcile now" on /admin:
 * `requestReconciliation`); a full run, once per `fullEveryMin`; an incremental run, once per `everyMin`, of
 * the orders touched since the last run kept (./scope.ts), or a full one when none was kept. Each claim is a
 * unique slot, as every business key here: a run that fails gives its slot back for another try; one whose
 * process dies keeps it, and the next period runs. Before it checks, a run repairs what is safe to repair among
 * the orders it checks (./repair.ts), and the report lists what it repaired: what stays a violation is what it
 * could not. A full run prunes reports older than a week and touches older than a day. Returns the report, or
 * null when nothing was due.
 */
export async function reconcileWhenDue(
  db: Db,
  periods: ReconcilePeriods,
  options: ReconcileOptions = {},
): Promise<ReconciliationReport | null> {
  const sql = db.$client;
  const epochS = Date.now() / 1000;
  const claim = async (kind: ReconciliationKind, slot: number) => {
    const [row] = await sql<{ id: string }[]>`
      INSERT INTO reconciliation_report (kind, slot) VALUES (${kind}, ${slot})
      ON CONFLICT (kind, slot) DO NOTHING RETURNING id::text`;
    return row?.id;
  };
  const [asked] = await sql`DELETE FROM reconciliation_request RETURNING requested_at`;
  if (asked) {
    const id = await claim("requested", Math.floor(epochS * 1000));
    if (id) return keep(db, id, "requested", null, options);
  }
  const full = await claim("full", Math.floor(epochS / (periods.fullEveryMin * 60)));
  if (full) return keep(db, full, "full", null, options);
  // One run at a time: an incremental run beside a full one would keep a report without what the full one finds.
  const [running] = await sql`
    SELECT 1 FROM reconciliation_report WHERE checked_at IS NULL AND claimed_at > now() - interval '15 minutes'`;
  if (running) return null;
  const incremental = await claim("incremental", Math.floor(epochS / (periods.everyMin * 60)));
  if (!incremental) return null;
  const previous = await lastReconciliation(db);
  // Touches are kept a day (a full run prunes older ones): after a longer pause, check every order.
  const recent = previous && Date.now() - previous.claimedAt.getTime() < 12 * 3600_000 ? previous : null;
  return keep(db, incremental, "incremental", recent, options);
}

/**
 * Runs the claimed reconciliation `id` and keeps its report; gives the claim back when it fails. Given the last
 * run kept, it checks the orders touched since (an incremental run); without, every order.
 */
async function keep(
  db: Db,
  id: string,
  kind: ReconciliationKind,
  previous: KeptReconciliation | null,
  options: ReconcileOptions,
): Promise<ReconciliationReport> {
  const sql = db.$client;
  const lagSeconds = options.lagSeconds ?? 60;
  try {
    const started = performance.now();
    let report: ReconciliationReport;
    if (previous) {
      const since = new Date(previous.claimedAt.getTime() - (lagSeconds + OVERLAP_S) * 1000);
      const orders = await ordersToCheck(db, since);
      const repairs = await repairWhatIsSafe(db, { lagSeconds, orders });
      report = { ...(await reconcileTouched(db, orders, previous, options)), repairs };
    } else {
      const repairs = await repairWhatIsSafe(db, { lagSeconds });
      report = { ...(await reconcile(db, options)), repairs };
    }
    const tookMs = Math.round(performance.now() - started);
    await sql`
      UPDATE reconciliation_report
         SET checked_at = ${report.checkedAt.toISOString()}::timestamptz, took_ms = ${tookMs},
             orders_checked = ${report.ordersChecked ?? null}, ok = ${report.ok},
             open_orders = ${JSON.stringify(report.openOrders ?? [])}::jsonb,
             invariants = ${JSON.stringify(report.invariants, bigintAsText)}::jsonb,
             repairs = ${JSON.stringify(report.repairs ?? [])}::jsonb
       WHERE id = ${id}`;
    if (kind !== "incremental") {
      await sql`DELETE FROM reconciliation_report WHERE claimed_at < now() - interval '7 days'`;
      await sql`DELETE FROM order_touch WHERE at < now() - interval '1 day'`;
    }
    return { ...report, kind, tookMs };
  } catch (error) {
    await sql`DELETE FROM reconciliation_report WHERE id = ${id} AND checked_at IS NULL`.catch(() => {});
    throw error;
  }
}

/** "Reconcile now": one full run, taken by the next worker to look (a second request before then is the same one). */
export async function requestReconciliation(db: Db): Promise<void> {
  await db.$client`INSERT INTO reconciliation_request (id) VALUES (1) ON CONFLICT (id) DO NOTHING`;
}

/** Whether a "Reconcile now" waits for a worker to take it. */
export async function reconciliationRequested(db: Db): Promise<boolean> {
  const [row] = await db.$client`SELECT 1 FROM reconciliation_request`;
  return row !== undefined;
}

export type KeptReconciliation = ReconciliationReport & { claimedAt: Date };

/** The last reconciliation kept by `reconcileWhenDue`, or null when none has finished yet. */
export async function lastReconciliation(db: Db): Promise<KeptReconciliation | null> {
  // Timestamps come back as text from this client (drizzle's setting).
  const [row] = await db.$client<
    {
      kind: ReconciliationKind;
      claimed_at: string;
      checked_at: string;
      took_ms: number | null;
      orders_checked: number | null;
      ok: boolean;
      invariants: InvariantResult[];
      repairs: Repair[] | null;
    }[]
  >`
    SELECT kind, claimed_at, checked_at, took_ms, orders_checked, ok, invariants, repairs FROM reconciliation_report
     WHERE checked_at IS NOT NULL ORDER BY checked_at DESC LIMIT 1`;
  return row
    ? {
        kind: row.kind,
        claimedAt: new Date(row.claimed_at),
        checkedAt: new Date(row.checked_at),
        ok: row.ok,
        invariants: row.invariants,
        repairs: row.repairs ?? [],
        ...(row.orders_checked === null ? {} : { ordersChecked: row.orders_checked }),
        ...(row.took_ms === null ? {} : { tookMs: row.took_ms }),
      }
    : null;
}
