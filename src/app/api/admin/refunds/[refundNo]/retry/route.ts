import { adminAction } from "~/server/admin/actions";
import { getAppContext } from "~/server/app-context";
import { retryFailedRefund } from "~/server/refunds/retry-refund";

/** The operations page's "Retry" button for a refund the provider rejected: the same refund number again. */
export function POST(req: Request, { params }: { params: Promise<{ refundNo: string }> }) {
  return adminAction(req, async () => {
    const { refundNo } = await params;
    const app = getAppContext();
    return `refund ${refundNo}: ${await retryFailedRefund(app.db, refundNo, app.payments)}`;
  });
}
