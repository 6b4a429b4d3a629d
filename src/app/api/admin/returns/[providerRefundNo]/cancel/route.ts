import { adminAction } from "~/server/admin/actions";
import { getAppContext } from "~/server/app-context";
import { cancelReturn } from "~/server/refunds/returns";

/** The operations page's "Cancel" button for a return whose goods never came: it refunds nothing. */
export function POST(req: Request, { params }: { params: Promise<{ providerRefundNo: string }> }) {
  return adminAction(req, getAppContext().adminToken, async () => {
    const { providerRefundNo } = await params;
    const answer = await cancelReturn(getAppContext().db, providerRefundNo);
    return `return ${providerRefundNo}: ${answer.status}`;
  });
}
