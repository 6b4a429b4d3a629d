import {
  ADMIN_ACTIONS,
  type AdminAction,
  listTradesForAdmin,
  NOTIFICATION_ACTIONS,
} from "~/mockpay/server/admin";
import { getMockPayContext } from "~/mockpay/server/context";
import { ENDPOINT_MODES, listEndpoints } from "~/mockpay/server/endpoints";
import { deliveryStatusLabel, formatAmount, tradeStatusLabel } from "./format";

const LABELS: Record<AdminAction, string> = {
  FIRE_CONCURRENT: "Fire N identical notifications at once",
  RESEND: "Resend",
  TAMPERED_SIGNATURE: "Send with a tampered signature",
  WRONG_AMOUNT: "Send a wrong amount",
  STALE_TIMESTAMP: "Send a stale timestamp",
  CLOSED_AFTER_SUCCESS: "Send payment.closed after success",
  DELAY: "Delay pending deliveries",
  REORDER: "Send all facts newest first",
  DROP_ON: "Drop all notifications",
  DROP_OFF: "Stop dropping notifications",
  REJECT_REFUNDS: "Reject the next refund requests (count)",
  FAIL_REFUNDS: "Accept the next refunds, then fail them (count)",
  SILENT_REFUNDS: "Decide the next refunds without notifying (count)",
};

/** MockPay's operator view: transactions, every delivery attempt, and the faults to inject. */
export default async function ProviderAdminPage({
  searchParams,
}: {
  searchParams: Promise<{ message?: string }>;
}) {
  const { message } = await searchParams;
  const { db } = getMockPayContext();
  const [rows, endpoints] = await Promise.all([listTradesForAdmin(db), listEndpoints(db)]);
  const active = rows.some((row) => row.notifications.some((n) => n.notification.status === "PENDING"));
  return (
    <section aria-labelledby="admin-heading">
      <p className="muted small">MockPay · provider admin</p>
      <h2 id="admin-heading">Transactions and deliveries</h2>
      {message && (
        <p role="status" className="notice">
          {message}
        </p>
      )}
      {active && (
        <>
          {/* While deliveries run, the page reloads itself: no script needed. */}
          <meta httpEquiv="refresh" content="2" />
          <p className="muted small">Deliveries in progress; this page refreshes by itself.</p>
        </>
      )}
      <h3>Merchant endpoints</h3>
      {endpoints.length === 0 && (
        <p className="muted">None yet: one appears with the first delivery to it.</p>
      )}
      {endpoints.map(({ endpoint, keys }) => (
        <article
          key={endpoint.id}
          id={`endpoint-${endpoint.id}`}
          className="trade"
          aria-label={`Endpoint ${endpoint.url}`}
        >
          <p>
            <code>{endpoint.url}</code> · <span data-testid="endpoint-format">{endpoint.format}</span> ·{" "}
            <strong data-testid="endpoint-status" className={endpoint.status === "DISABLED" ? "alert" : ""}>
              {endpoint.status}
            </strong>
            {endpoint.disabledReason && <span className="alert"> ({endpoint.disabledReason})</span>}
            {endpoint.pausedUntil && endpoint.pausedUntil > new Date() && (
              <span> · slowed down until {endpoint.pausedUntil.toISOString().slice(11, 19)}</span>
            )}
          </p>
          {keys.length > 0 && (
            <table>
              <thead>
                <tr>
                  <th scope="col">Scheme</th>
                  <th scope="col">For the merchant</th>
                  <th scope="col">Signs until</th>
                </tr>
              </thead>
              <tbody>
                {keys.map((key) => (
                  <tr key={key.id} data-testid="endpoint-key">
                    <td>{key.scheme}</td>
                    <td>
                      <code>{key.forMerchant}</code>
                    </td>
                    <td>{key.retiresAt ? key.retiresAt.toISOString() : "current"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <form method="post" action={`/provider/api/admin/endpoints/${endpoint.id}`} className="faults">
            <input type="hidden" name="action" value="MODE" />
            <label>
              format{" "}
              <select name="mode" defaultValue={endpoint.format === "legacy" ? "legacy" : "standard-v1"}>
                {ENDPOINT_MODES.map((mode) => (
                  <option key={mode} value={mode}>
                    {mode}
                  </option>
                ))}
              </select>
            </label>
            <button type="submit">Switch format</button>
          </form>
          <form method="post" action={`/provider/api/admin/endpoints/${endpoint.id}`} className="faults">
            <input type="hidden" name="action" value="ROTATE" />
            <label>
              overlap (s) <input name="overlapS" type="number" min={0} max={604800} defaultValue={86400} />
            </label>
            <button type="submit">Rotate the signing key</button>
          </form>
          {endpoint.status === "DISABLED" && (
            <form method="post" action={`/provider/api/admin/endpoints/${endpoint.id}`} className="faults">
              <button type="submit" name="action" value="ENABLE">
                Enable again
              </button>
            </form>
          )}
        </article>
      ))}
      <h3>Trades</h3>
      {rows.length === 0 && <p>No transactions yet: place an order and pay it.</p>}
      {rows.map(({ trade, notifications }) => (
        <article
          key={trade.id}
          id={`trade-${trade.outTradeNo}`}
          className="trade"
          aria-label={`Trade ${trade.outTradeNo}`}
        >
          <h3>
            <code>{trade.outTradeNo}</code> · {formatAmount(trade.amountCents, trade.currency)} ·{" "}
            <span>
              {tradeStatusLabel(trade.status)} <code data-testid="trade-status">{trade.status}</code>
            </span>
            {trade.dropNotifications && <span className="alert"> · dropping notifications</span>}
          </h3>
          <p className="muted small">
            transaction {trade.transactionId ?? "—"} · notify {trade.notifyUrl}
          </p>
          {notifications.map(({ notification, attempts }) => (
            <section key={notification.id} aria-label={`Notification ${notification.type}`}>
              <p>
                <strong>{notification.type}</strong> <code>{notification.id}</code> ·{" "}
                {deliveryStatusLabel(notification.status)} <code>{notification.status}</code> ·{" "}
                {notification.attempts} scheduled attempt(s)
              </p>
              <table>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Attempt</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Merchant answer</th>
                    <th scope="col">Latency</th>
                  </tr>
                </thead>
                <tbody>
                  {attempts.map((attempt) => (
                    <tr
                      key={attempt.id}
                      data-testid="delivery-attempt"
                      className={attempt.ok ? "" : "failed"}
                    >
                      <td>{attempt.startedAt.toISOString().slice(11, 23)}</td>
                      <td>{attempt.attemptNo || "manual"}</td>
                      <td>{attempt.kind}</td>
                      <td>
                        {attempt.httpStatus ?? "—"}{" "}
                        {attempt.ok ? "acknowledged" : (attempt.error ?? "rejected")}
                      </td>
                      <td>{attempt.latencyMs} ms</td>
                    </tr>
                  ))}
                </tbody>
              </table>
              <form
                method="post"
                action={`/provider/api/admin/trades/${encodeURIComponent(trade.outTradeNo)}`}
                className="faults"
              >
                <input type="hidden" name="notificationId" value={notification.id} />
                <label>
                  N <input name="count" type="number" min={1} max={50} defaultValue={10} />
                </label>
                {NOTIFICATION_ACTIONS.map((action) => (
                  <button key={action} type="submit" name="action" value={action}>
                    {LABELS[action]}
                  </button>
                ))}
              </form>
            </section>
          ))}
          <form
            method="post"
            action={`/provider/api/admin/trades/${encodeURIComponent(trade.outTradeNo)}`}
            className="faults"
          >
            <label>
              delay (s) <input name="delayS" type="number" min={1} max={3600} defaultValue={30} />
            </label>
            {ADMIN_ACTIONS.filter((a) => !(NOTIFICATION_ACTIONS as readonly string[]).includes(a)).map(
              (action) => (
                <button key={action} type="submit" name="action" value={action}>
                  {LABELS[action]}
                </button>
              ),
            )}
          </form>
        </article>
      ))}
    </section>
  );
}
