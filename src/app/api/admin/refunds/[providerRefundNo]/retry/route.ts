import { adminAction } from "~/server/admin/actions";
import { getAppContext } from "~/server/app-context";
import { retryFailedRefund } from "~/server/refunds/retry-refund";

/** The operations page's "Retry" button for a refund the provider rejected: the same refund number again. */
export function POST(req: Request, { params }: { params: Promise<{ providerRefundNo: string }> }) {
  return adminAction(req, getAppContext().adminToken, async () => {
    const { providerRefundNo } = await params;
    const app = getAppContext();
    return `refund ${providerRefundNo}: ${await retryFailedRefund(app.db, providerRefundNo, app.payments)}`;
  });
}
