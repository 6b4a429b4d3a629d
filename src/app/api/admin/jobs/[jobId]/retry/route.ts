import { adminAction } from "~/server/admin/actions";
import { retryJob } from "~/server/admin/overview";
import { getAppContext } from "~/server/app-context";

/** The operations page's "Retry" button for a dead letter. */
export function POST(req: Request, { params }: { params: Promise<{ jobId: string }> }) {
  return adminAction(req, getAppContext().adminToken, async () => {
    const { jobId } = await params;
    return (await retryJob(getAppContext().db, jobId)) ? `job ${jobId} rescheduled` : `no job ${jobId}`;
  });
}
