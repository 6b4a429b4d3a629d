import { adminAction } from "~/server/admin/actions";
import { getAppContext } from "~/server/app-context";
import { requestReconciliation } from "~/server/reconciliation/reconcile";

/** The operations page's "Reconcile now": queues one full run, which the next event worker to look takes. */
export function POST(req: Request) {
  return adminAction(req, getAppContext().adminToken, async () => {
    await requestReconciliation(getAppContext().db);
    return "reconciliation queued: an event worker runs it within seconds";
  });
}
