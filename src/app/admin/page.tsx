import { getAppContext } from "../../server/app-context";
import { listNotificationIssues } from "../../server/payments/queries";
import { AutoRefresh } from "../provider/admin/auto-refresh";

export const dynamic = "force-dynamic";

/** The merchant's operations page: what arrived from the payment provider and what needs a person. */
export default async function AdminPage() {
  const { issues, totals } = await listNotificationIssues(getAppContext().db);
  return (
    <section aria-labelledby="ops-heading">
      <h2 id="ops-heading">Operations</h2>
      <AutoRefresh active intervalMs={3000} />
      <h3>Payment notifications received, by outcome</h3>
      <table>
        <tbody>
          {totals.map((row) => (
            <tr key={row.outcome}>
              <th scope="row">{row.outcome}</th>
              <td data-testid={`outcome-${row.outcome}`}>{row.count}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Refused notifications and alerts</h3>
      {issues.length === 0 ? (
        <p>None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Received</th>
              <th scope="col">Payment</th>
              <th scope="col">Type</th>
              <th scope="col">Outcome</th>
              <th scope="col">Answer</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {issues.map((n) => (
              <tr key={n.id} className={n.alert ? "failed" : ""} data-testid="notification-issue">
                <td>{n.receivedAt.toISOString().slice(0, 19).replace("T", " ")}</td>
                <td>
                  <code>{n.outTradeNo ?? "—"}</code>
                </td>
                <td>{n.type ?? "—"}</td>
                <td>
                  {n.outcome}
                  {n.alert && <strong className="alert"> · alert</strong>}
                </td>
                <td>{n.httpStatus}</td>
                <td>{n.detail}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
