import { adminAction } from "~/server/admin/actions";
import { getAppContext } from "~/server/app-context";
import { receiveReturn } from "~/server/refunds/returns";

/** The operations page's "Received" button: the goods of a return are back; the refund goes out. */
export function POST(req: Request, { params }: { params: Promise<{ providerRefundNo: string }> }) {
  return adminAction(req, getAppContext().adminToken, async () => {
    const { providerRefundNo } = await params;
    const app = getAppContext();
    const answer = await receiveReturn(
      app.db,
      providerRefundNo,
      `operator:${providerRefundNo}`,
      app.payments,
    );
    return `return ${providerRefundNo}: ${answer.moved ? "received; " : ""}${answer.status}`;
  });
}
