import Link from "next/link";
import { AutoRefresh } from "~/client/components/auto-refresh";
import { Status } from "~/client/components/status";
import { Table } from "~/client/components/table";
import { formatMoney } from "~/client/money";
import { operationsOverview } from "~/server/admin/overview";
import { getAppContext } from "~/server/app-context";
import { Charts } from "./charts";

export const dynamic = "force-dynamic";

const time = (d: Date | null | undefined) => (d ? d.toISOString().slice(11, 19) : "—");
const short = (id: string) => id.slice(0, 8);
/** One line on the last kept report: what it found, what it looked at, when, and how long it took. */
function reconciliationStatus(r: Awaited<ReturnType<typeof operationsOverview>>["reconciliation"]) {
  if (r === null) return "No reconciliation kept yet";
  const found = r.ok
    ? "No violation"
    : `${r.invariants.filter((i) => i.violations.length).length} invariant(s) broken`;
  const took = r.tookMs === undefined ? "" : `, in ${r.tookMs} ms`;
  return `${found} · ${checkedWhat(r)} · checked ${time(r.checkedAt)} (${age(r.checkedAt)} ago${took})`;
}

/** What the run behind a kept report looked at. */
const checkedWhat = (r: { kind?: string; ordersChecked?: number }) =>
  r.ordersChecked !== undefined
    ? `${r.ordersChecked} order(s) touched since the run before`
    : r.kind === "requested"
      ? "every order, as asked"
      : "every order";
const age = (d: Date) => {
  const s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
  return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
};

/** The merchant's operations page: state, deliveries, dead letters, and whether the books balance. */
export default async function AdminPage({ searchParams }: { searchParams: Promise<{ message?: string }> }) {
  const { message } = await searchParams;
  const o = await operationsOverview(getAppContext().db);
  const r = o.reconciliation;
  return (
    <section aria-labelledby="ops-heading" className="ops">
      <h2 id="ops-heading">Operations</h2>
      {message && (
        <p role="status" className="notice">
          {message}
        </p>
      )}
      <AutoRefresh active intervalMs={3000} />

      {o.alerts.length > 0 && (
        <section aria-labelledby="alerts-heading" className="recon bad">
          <h3 id="alerts-heading">Alerts</h3>
          <ul>
            {o.alerts.map((alert) => (
              <li key={alert.name} data-testid="alert">
                <strong>{alert.title}</strong>: {alert.detail}
              </li>
            ))}
          </ul>
        </section>
      )}

      <h3>Last 30 minutes (this instance)</h3>
      <Charts series={getAppContext().telemetry.series} />

      <section aria-labelledby="recon-heading" className={r?.ok === false ? "recon bad" : "recon ok"}>
        <h3 id="recon-heading">Reconciliation</h3>
        <p data-testid="reconciliation-status">{reconciliationStatus(r)}</p>
        <form method="post" action="/api/admin/reconciliation">
          <button type="submit" disabled={o.reconciliationRequested}>
            {o.reconciliationRequested ? "Reconciliation queued" : "Reconcile now"}
          </button>
        </form>
        <ul>
          {(r?.invariants ?? []).map((invariant) => (
            <li key={invariant.name} className={invariant.violations.length ? "failed" : ""}>
              {invariant.violations.length ? "✗" : "✓"} {invariant.description}
              {invariant.violations.map((v) => (
                <details key={v.message} open>
                  <summary>{v.message}</summary>
                  <pre>{v.rows.map((row) => JSON.stringify(row)).join("\n")}</pre>
                </details>
              ))}
            </li>
          ))}
        </ul>
        {o.repairs.length > 0 && (
          <details data-testid="reconciliation-repairs">
            <summary>Repaired by the last run: {o.repairs.length}</summary>
            <ul>
              {o.repairs.map((repair) => (
                <li key={`${repair.kind}:${repair.refundNo}:${repair.skuId ?? ""}`}>
                  {repair.kind === "money"
                    ? `order ${repair.orderId}: ${repair.amountCents} ${repair.currency} refunded (${repair.refundNo})`
                    : `order ${repair.orderId}: ${repair.quantity} × ${repair.skuId} that never shipped back to stock`}
                </li>
              ))}
            </ul>
          </details>
        )}
      </section>

      <h3>Failed refunds</h3>
      <ActionTable
        testId="failed-refund"
        empty="No refund is waiting for a person."
        columns={["Refund number", "Amount", "Why MockPay rejected it"]}
        rows={o.failedRefunds.map((refund) => ({
          key: refund.id,
          cells: [
            refund.refundNo,
            formatMoney(refund.amountCents, refund.currency),
            refund.failureReason ?? "",
          ],
          actions: [
            {
              label: "Retry",
              url: `/api/admin/refunds/${encodeURIComponent(refund.providerRefundNo)}/retry`,
            },
          ],
        }))}
      />

      <h3>Returns awaiting the goods</h3>
      <ActionTable
        testId="awaiting-return"
        empty="No return is waiting for its goods."
        columns={["Refund number", "Amount", "Asked"]}
        rows={o.returns.map((refund) => ({
          key: refund.id,
          cells: [
            refund.refundNo,
            formatMoney(refund.amountCents, refund.currency),
            refund.createdAt.toLocaleString(),
          ],
          actions: [
            {
              label: "Received",
              url: `/api/admin/returns/${encodeURIComponent(refund.providerRefundNo)}/received`,
            },
            {
              label: "Cancel (goods never came)",
              url: `/api/admin/returns/${encodeURIComponent(refund.providerRefundNo)}/cancel`,
            },
          ],
        }))}
      />

      <h3>Dead letters</h3>
      <ActionTable
        testId="dead-letter"
        empty="No job has given up."
        columns={["Job", "Attempts", "Last error"]}
        rows={o.deadLetters.map((job) => ({
          key: job.id,
          cells: [job.key ?? "", `${job.attempts}/${job.max_attempts}`, job.last_error?.slice(0, 120) ?? ""],
          actions: [{ label: "Retry", url: `/api/admin/jobs/${job.id}/retry` }],
        }))}
      />
      {o.failingJobs.length > 0 && (
        <p className="muted small">
          {o.failingJobs.length} job(s) failing and being retried with backoff:{" "}
          {o.failingJobs.map((j) => `${j.key} (${j.attempts})`).join(", ")}
        </p>
      )}

      <h3>Outbox events and their consumers</h3>
      <Table
        columns={["Created", "Event", "Order", "Relayed", "Consumed by"]}
        empty="No event yet: paying an order publishes OrderPaid here."
        count={o.events.length}
      >
        {o.events.map(({ event, consumed }) => (
          <tr key={event.id}>
            <td>{time(event.createdAt)}</td>
            <td>{event.eventType}</td>
            <td>
              <code>{short(event.aggregateId)}</code>
            </td>
            <td>{time(event.publishedAt)}</td>
            <td>{consumed.map((c) => `${c.consumerName}: ${c.result ?? c.status}`).join(", ") || "—"}</td>
          </tr>
        ))}
      </Table>

      <h3>Orders</h3>
      <Table
        columns={["Order", "Status", "Amount", "Placed"]}
        empty="No order yet: place one in the shop."
        count={o.orders.length}
      >
        {o.orders.map((order) => (
          <tr key={order.id}>
            <td>
              <Link href={`/admin/orders/${order.id}`} prefetch={false}>
                <code>{short(order.id)}</code>
              </Link>
            </td>
            <td>
              <Status kind="order" value={order.status} />
            </td>
            <td>{formatMoney(order.amountCents, order.currency)}</td>
            <td>{time(order.createdAt)}</td>
          </tr>
        ))}
      </Table>

      <h3>Payments and refunds</h3>
      <Table
        columns={["Payment or refund", "Status", "Amount", "Transaction or reason"]}
        empty="No payment yet."
        count={o.payments.length + o.refunds.length}
      >
        {o.payments.map((p) => (
          <tr key={p.id}>
            <td>
              <code>{p.outTradeNo}</code>
            </td>
            <td>
              <Status kind="payment" value={p.status} />
            </td>
            <td>{formatMoney(p.amountCents, p.currency)}</td>
            <td>{p.transactionId ?? "—"}</td>
          </tr>
        ))}
        {o.refunds.map((refund) => (
          <tr key={refund.id}>
            <td>
              refund <code>{refund.refundNo}</code>
            </td>
            <td>
              <Status kind="refund" value={refund.status} />
            </td>
            <td>{formatMoney(refund.amountCents, refund.currency)}</td>
            <td>{refund.reason}</td>
          </tr>
        ))}
      </Table>

      <h3>Idempotency records</h3>
      <Table
        columns={["Operation", "Key", "Status", "Lease", "Forgotten after"]}
        empty="No idempotency key yet: every order, payment and refund request makes one."
        count={o.idempotencyRecords.length}
      >
        {o.idempotencyRecords.map((rec) => (
          <tr key={rec.id}>
            <td>{rec.bizType}</td>
            <td>
              <code>{rec.idempotencyKey}</code>
            </td>
            <td>
              <Status kind="record" value={rec.status} />
            </td>
            <td>v{rec.leaseVersion}</td>
            <td>{rec.expiresAt.toISOString().slice(0, 16).replace("T", " ")}</td>
          </tr>
        ))}
      </Table>

      <h3>Payment notifications received, by outcome</h3>
      <Table
        columns={["Outcome", "Count"]}
        empty="No notification from MockPay yet."
        count={o.notifications.totals.length}
      >
        {o.notifications.totals.map((row) => (
          <tr key={row.outcome}>
            <th scope="row">
              <Status kind="notification" value={row.outcome} />
            </th>
            <td data-testid={`outcome-${row.outcome}`}>{row.count}</td>
          </tr>
        ))}
      </Table>

      <h3>Refused before verification, last 24 h</h3>
      <p className="muted small">
        Unsigned, forged or stale: anyone can send these, so they are only counted, never tied to a payment.
      </p>
      <Table columns={["Reason", "Count"]} empty="None." count={o.notifications.refused.length}>
        {o.notifications.refused.map((row) => (
          <tr key={row.reason}>
            <th scope="row">{row.reason}</th>
            <td data-testid={`refused-${row.reason}`}>{row.count}</td>
          </tr>
        ))}
      </Table>

      <h3>Verified notifications refused, and alerts</h3>
      <Table
        columns={["Received", "Payment", "Type", "Outcome", "HTTP", "Detail"]}
        empty="None."
        count={o.notifications.issues.length}
      >
        {o.notifications.issues.map((n) => (
          <tr key={n.id} className={n.alert ? "failed" : ""} data-testid="notification-issue">
            <td>{time(n.receivedAt)}</td>
            <td>
              <code>{n.outTradeNo ?? "—"}</code>
            </td>
            <td>{n.type ?? "—"}</td>
            <td>
              <Status kind="notification" value={n.outcome} />
              {n.alert && <strong className="alert"> · alert</strong>}
            </td>
            <td>{n.httpStatus}</td>
            <td>{n.detail}</td>
          </tr>
        ))}
      </Table>
    </section>
  );
}

/** Things awaiting a person, each with its buttons (plain form posts to their admin routes). */
function ActionTable({
  rows,
  testId,
  columns,
  empty,
}: {
  rows: { key: string; cells: string[]; actions: { label: string; url: string }[] }[];
  testId: string;
  columns: string[];
  empty: string;
}) {
  return (
    <Table columns={[...columns, ""]} empty={empty} count={rows.length}>
      {rows.map((row) => (
        <tr key={row.key} className="failed" data-testid={testId}>
          {row.cells.map((cell, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: a row's cells are a fixed list of columns
            <td key={i}>{cell}</td>
          ))}
          <td>
            {row.actions.map((action) => (
              <form key={action.url} method="post" action={action.url}>
                <button type="submit">{action.label}</button>
              </form>
            ))}
          </td>
        </tr>
      ))}
    </Table>
  );
}
