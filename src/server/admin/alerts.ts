import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { type ReconciliationReport, reconcile, violationCount } from "~/server/reconciliation/reconcile";

export interface Alert {
  name: string;
  title: string;
  detail: string;
}

export interface OpsFigures {
  outboxLagSeconds: number;
  stuckProcessing: number;
  deadLetters: number;
  amountMismatches24h: number;
  /** Successes naming a transaction id already recorded on another payment (a provider's bug, or a forgery). */
  transactionClashes24h: number;
  /** Notifications refused before verification (unsigned, forged, stale) in the last 10 minutes, all instances. */
  signatureFailures10m: number;
  /** Notifications that passed verification in the last 10 minutes. */
  verifiedNotifications10m: number;
  /** Refunds the provider rejected, waiting for a person's Retry on /admin. */
  failedRefunds: number;
  /** Payments the provider took after their order stopped awaiting them, whose automatic refund has not succeeded. */
  lateUnrefunded: number;
  /** Consumer jobs due for over a minute that no worker has taken (or has held that long): the event worker is down or stuck. */
  jobsNotTaken: number;
  /** Refunds sent (or to be sent) whose outcome the provider has not told for longer than the threshold. */
  refundsInFlight: number;
  /** Orders whose money is not the price of what they keep (reconciliation's money-conserved, listed rows). */
  unconservedOrders: number;
  /** Payments whose ledger disagrees with their state or with the provider's records (listed rows). */
  ledgerDisagreements: number;
  reconciliationViolations: number;
  /** How old the reconciliation behind the three figures above is; null when none has been kept yet. */
  reconciliationAgeSeconds: number | null;
  /** How long this process has been up: none kept this long after start-up is as stale as an old one. */
  upSeconds: number;
}

export interface AlertThresholds {
  signatureFailures10m: number;
  outboxLagSeconds: number;
}

export const DEFAULT_THRESHOLDS: AlertThresholds = { signatureFailures10m: 5, outboxLagSeconds: 60 };

/** A refund with no outcome from the provider for this long is in flight past its time (alert; queried meanwhile). */
export const REFUND_IN_FLIGHT_ALERT_S = 300;

/**
 * How often the event worker reconciles, once per period for the whole fleet (`reconcileWhenDue`: the first
 * worker to claim the period's slot): the orders touched since the last run every `RECONCILE_EVERY_MIN`, every
 * order every `RECONCILE_FULL_EVERY_MIN`. The alert log, /admin and /api/metrics of every instance read the
 * last one kept (`lastReconciliation`); only `npm run reconcile` runs one on the spot.
 */
export const RECONCILE_EVERY_MIN = 1;
export const RECONCILE_FULL_EVERY_MIN = 60;
/** The last kept reconciliation older than this: the worker's scheduled runs are not happening (an alert). */
export const RECONCILIATION_STALE_S = 3 * RECONCILE_EVERY_MIN * 60;
/** None kept this long after start-up: one period, and the time a worker takes to claim and run it. */
export const RECONCILIATION_FIRST_DUE_S = RECONCILE_EVERY_MIN * 60 + 60;
const PROCESS_STARTED_AT = Date.now() - process.uptime() * 1000;

/**
 * The figures operators watch, read from the database (so every instance agrees). The reconciliation's are
 * those of `report`: a fresh one when none is given, none when it is null (nothing kept yet).
 */
export async function opsFigures(
  db: Db,
  report?: ReconciliationReport | null,
  now = Date.now(),
  startedAt = PROCESS_STARTED_AT,
): Promise<OpsFigures> {
  const [row] = await db.execute<{
    outbox_lag: number;
    stuck: number;
    dead: number;
    mismatches: number;
    clashes: number;
    signatures: number;
    verified: number;
    failed_refunds: number;
    late: number;
    in_flight: number;
    not_taken: number;
  }>(sql`
    SELECT coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM outbox_event WHERE published_at IS NULL)), 0)::float8 AS outbox_lag,
           (SELECT count(*)::int FROM idempotency_record WHERE status = 'PROCESSING' AND locked_until < now()) AS stuck,
           (SELECT count(*)::int FROM graphile_worker.jobs WHERE attempts >= max_attempts) AS dead,
           (SELECT count(*)::int FROM payment_notification
             WHERE outcome = 'AMOUNT_MISMATCH' AND received_at > now() - interval '24 hours') AS mismatches,
           (SELECT count(*)::int FROM payment_notification
             WHERE outcome = 'TRANSACTION_CLASH' AND received_at > now() - interval '24 hours') AS clashes,
           (SELECT coalesce(sum(count), 0)::int FROM refused_notification
             WHERE minute > now() - interval '10 minutes') AS signatures,
           (SELECT count(*)::int FROM payment_notification
             WHERE received_at > now() - interval '10 minutes') AS verified,
           (SELECT count(*)::int FROM refund_order WHERE status = 'REFUND_FAILED') AS failed_refunds,
           (SELECT count(*)::int FROM payment_order p WHERE p.status = 'PAID_LATE'
             AND NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id AND r.status = 'REFUND_SUCCESS'
                              AND r.amount_cents = p.amount_cents)) AS late,
           (SELECT count(*)::int FROM refund_order WHERE status IN ('REFUND_CREATED', 'REFUND_PROCESSING')
             AND updated_at < now() - ${REFUND_IN_FLIGHT_ALERT_S} * interval '1 second') AS in_flight,
           (SELECT count(*)::int FROM graphile_worker._private_jobs
             WHERE attempts < max_attempts AND run_at < now() - interval '60 seconds'
               AND (locked_at IS NULL OR locked_at < now() - interval '60 seconds')) AS not_taken`);
  const reconciliation = report === undefined ? await reconcile(db) : report;
  return {
    outboxLagSeconds: Number(row?.outbox_lag ?? 0),
    stuckProcessing: row?.stuck ?? 0,
    deadLetters: row?.dead ?? 0,
    amountMismatches24h: row?.mismatches ?? 0,
    transactionClashes24h: row?.clashes ?? 0,
    signatureFailures10m: row?.signatures ?? 0,
    verifiedNotifications10m: row?.verified ?? 0,
    failedRefunds: row?.failed_refunds ?? 0,
    lateUnrefunded: row?.late ?? 0,
    refundsInFlight: row?.in_flight ?? 0,
    jobsNotTaken: row?.not_taken ?? 0,
    unconservedOrders: rowsOf(reconciliation, "money-conserved"),
    ledgerDisagreements:
      rowsOf(reconciliation, "ledger-agrees") + rowsOf(reconciliation, "ledger-agrees-with-provider"),
    reconciliationViolations: reconciliation ? violationCount(reconciliation) : 0,
    reconciliationAgeSeconds: reconciliation
      ? Math.max(0, Math.round((now - reconciliation.checkedAt.getTime()) / 1000))
      : null,
    upSeconds: Math.round((now - startedAt) / 1000),
  };
}

/** The rows an invariant's checks listed (each check lists at most the report's sample size). */
function rowsOf(report: ReconciliationReport | null, invariant: string): number {
  const found = report?.invariants.find((i) => i.name === invariant);
  return found?.violations.reduce((sum, violation) => sum + violation.rows.length, 0) ?? 0;
}

/** Conditions a person must see: shown on /admin and logged at error level. */
export function alertsFrom(figures: OpsFigures, thresholds: AlertThresholds = DEFAULT_THRESHOLDS): Alert[] {
  const alerts: Alert[] = [];
  if (figures.unconservedOrders > 0) {
    alerts.push({
      name: "money_not_conserved",
      title: "Money held that an order does not keep",
      detail: `${figures.unconservedOrders} order(s) hold another amount than the price of what they keep (captured − refunded): see Reconciliation, money-conserved`,
    });
  }
  if (figures.ledgerDisagreements > 0) {
    alerts.push({
      name: "ledger_disagrees",
      title: "The money ledger disagrees",
      detail: `${figures.ledgerDisagreements} payment(s) whose ledger balances differ from their payments and refunds, or from MockPay's records`,
    });
  }
  if (figures.jobsNotTaken > 0) {
    alerts.push({
      name: "worker_stalled",
      title: "Events are not being consumed",
      detail: `${figures.jobsNotTaken} consumer job(s) due for over a minute and not taken: the event worker is down or stuck (a stuck worker replaces its job runner, then exits for its supervisor)`,
    });
  }
  if (figures.refundsInFlight > 0) {
    alerts.push({
      name: "refund_in_flight",
      title: "Refunds without an outcome",
      detail: `${figures.refundsInFlight} refund(s) sent more than ${REFUND_IN_FLIGHT_ALERT_S / 60} minutes ago with no outcome from the provider; they are being queried`,
    });
  }
  if (figures.lateUnrefunded > 0) {
    alerts.push({
      name: "late_payment",
      title: "Money received for a closed order",
      detail: `${figures.lateUnrefunded} payment(s) arrived after their order stopped awaiting them; their automatic refund has not succeeded yet`,
    });
  }
  if (figures.failedRefunds > 0) {
    alerts.push({
      name: "refund_failed",
      title: "Refund rejected by the provider",
      detail: `${figures.failedRefunds} refund(s) were rejected and the money is still held: retry them on /admin`,
    });
  }
  if (figures.transactionClashes24h > 0) {
    alerts.push({
      name: "transaction_clash",
      title: "Transaction id used twice",
      detail: `${figures.transactionClashes24h} success notification(s) in 24 h named a transaction already recorded on another payment; refused (409) and kept for a person`,
    });
  }
  if (figures.amountMismatches24h > 0) {
    alerts.push({
      name: "amount_mismatch",
      title: "Payment amount mismatch",
      detail: `${figures.amountMismatches24h} notification(s) in 24 h carried another amount than the payment`,
    });
  }
  // Anyone can send notifications that fail verification, so their number alone is no alarm (it is a figure
  // on /admin). It becomes one when none passed meanwhile: the provider's own notifications are failing too
  // (a webhook secret that differs from the provider's), or no real one arrived to tell them apart.
  if (
    figures.signatureFailures10m > thresholds.signatureFailures10m &&
    figures.verifiedNotifications10m === 0
  ) {
    alerts.push({
      name: "signature_failures",
      title: "Notifications failing verification, none passing",
      detail: `${figures.signatureFailures10m} refused in the last 10 minutes (threshold ${thresholds.signatureFailures10m}) and none verified: check PROVIDER_WEBHOOK_SECRET against the provider's`,
    });
  }
  if (figures.stuckProcessing > 0) {
    alerts.push({
      name: "stuck_processing",
      title: "Idempotency records stuck in PROCESSING",
      detail: `${figures.stuckProcessing} record(s) past their lease`,
    });
  }
  if (figures.outboxLagSeconds > thresholds.outboxLagSeconds) {
    alerts.push({
      name: "outbox_lag",
      title: "Outbox events are not being relayed",
      detail: `oldest unrelayed event is ${Math.round(figures.outboxLagSeconds)} s old`,
    });
  }
  if (figures.deadLetters > 0) {
    alerts.push({
      name: "dead_letters",
      title: "Dead letters",
      detail: `${figures.deadLetters} job(s) out of attempts`,
    });
  }
  const age = figures.reconciliationAgeSeconds;
  if (age === null ? figures.upSeconds > RECONCILIATION_FIRST_DUE_S : age > RECONCILIATION_STALE_S) {
    alerts.push({
      name: "reconciliation_stale",
      title: "Reconciliation is not running",
      detail: `${age === null ? `no reconciliation kept in the ${Math.round(figures.upSeconds / 60)} minutes since start-up` : `the last reconciliation is ${Math.round(age / 60)} minutes old`} (the event worker runs one every ${RECONCILE_EVERY_MIN} minute${RECONCILE_EVERY_MIN === 1 ? "" : "s"}): money and goods are unchecked`,
    });
  }
  if (figures.reconciliationViolations > 0) {
    alerts.push({
      name: "reconciliation",
      title: "Reconciliation violations",
      detail: `${figures.reconciliationViolations} violation(s): see Reconciliation`,
    });
  }
  return alerts;
}
