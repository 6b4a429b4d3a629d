import { getEnv } from "~/env";
import { retryJob } from "~/server/admin/overview";
import { getAppContext } from "~/server/app-context";
import { isAdminRequest } from "~/shared/admin-auth";

/** The operations page's "Retry" button for a dead letter. */
export async function POST(req: Request, { params }: { params: Promise<{ jobId: string }> }) {
  if (!isAdminRequest(req.headers, getEnv().ADMIN_TOKEN))
    return new Response("admin token required", { status: 401 });
  const { jobId } = await params;
  const retried = await retryJob(getAppContext().db, jobId);
  const message = retried ? `job ${jobId} rescheduled` : `no job ${jobId}`;
  return new Response(null, {
    status: 303,
    headers: { location: `/admin?message=${encodeURIComponent(message)}` },
  });
}
