import { renderMetrics } from "~/server/admin/metrics";
import { getAppContext } from "~/server/app-context";
import { isAdminRequest } from "~/shared/admin-auth";

/** Prometheus metrics; needs the admin token (Authorization: Bearer …). */
export async function GET(req: Request) {
  const app = getAppContext();
  if (!isAdminRequest(req.headers, app.adminToken))
    return new Response("admin token required", { status: 401 });
  const text = await renderMetrics(app.db, app.telemetry.registry);
  return new Response(text, { headers: { "content-type": app.telemetry.registry.contentType } });
}
