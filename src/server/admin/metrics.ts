import { Gauge, type Registry } from "prom-client";
import type { Db } from "~/server/db/client";
import { lastReconciliation } from "~/server/reconciliation/reconcile";
import { opsFigures, RECONCILE_EVERY_MIN } from "./alerts";

const GAUGES = {
  outboxLagSeconds: ["checkout_outbox_lag_seconds", "Age of the oldest outbox event not yet relayed"],
  stuckProcessing: [
    "checkout_idempotency_stuck_processing",
    "Idempotency records PROCESSING past their lease",
  ],
  deadLetters: ["checkout_dead_letters", "Consumer jobs out of attempts"],
  amountMismatches24h: [
    "checkout_amount_mismatches_24h",
    "Notifications with a wrong amount in the last 24 h",
  ],
  transactionClashes24h: [
    "checkout_transaction_clashes_24h",
    "Success notifications naming a transaction id already recorded on another payment, last 24 h",
  ],
  signatureFailures10m: [
    "checkout_signature_failures_10m",
    "Notifications refused before verification (unsigned, bad signature, stale timestamp), last 10 min",
  ],
  verifiedNotifications10m: [
    "checkout_verified_notifications_10m",
    "Notifications that passed verification, last 10 min",
  ],
  failedRefunds: ["checkout_failed_refunds", "Refunds the provider rejected, awaiting a retry"],
  lateUnrefunded: [
    "checkout_late_payments_unrefunded",
    "Payments taken after their order stopped awaiting them, not yet refunded",
  ],
  jobsNotTaken: [
    "checkout_jobs_not_taken",
    "Consumer jobs due for over a minute that no worker has taken: the event worker is down or stuck",
  ],
  refundsInFlight: [
    "checkout_refunds_in_flight",
    "Refunds without an outcome from the provider past their time (they are being queried)",
  ],
  unconservedOrders: [
    "checkout_money_unconserved_orders",
    "Orders whose captured − refunded is not the price of what they keep",
  ],
  ledgerDisagreements: [
    "checkout_ledger_disagreements",
    "Payments whose ledger differs from their state or from the provider's records",
  ],
  reconciliationViolations: [
    "checkout_reconciliation_violations",
    "Broken invariants found by the reconciliation check",
  ],
  reconciliationAgeSeconds: [
    "checkout_reconciliation_age_seconds",
    `Age of the last reconciliation the event worker kept (it runs one every ${RECONCILE_EVERY_MIN} min); absent before the first`,
  ],
} as const;

const registered = new WeakMap<Registry, Record<string, Gauge>>();

/** Prometheus text: this instance's counters plus the database-wide figures, read at scrape time. */
export async function renderMetrics(db: Db, registry: Registry): Promise<string> {
  let gauges = registered.get(registry);
  if (!gauges) {
    gauges = Object.fromEntries(
      Object.entries(GAUGES).map(([key, [name, help]]) => [
        key,
        new Gauge({ name, help, registers: [registry] }),
      ]),
    );
    registered.set(registry, gauges);
  }
  const figures = await opsFigures(db, await lastReconciliation(db));
  for (const [key, value] of Object.entries(figures)) {
    if (value === null) gauges[key]?.reset();
    else gauges[key]?.set(value);
  }
  return registry.metrics();
}
