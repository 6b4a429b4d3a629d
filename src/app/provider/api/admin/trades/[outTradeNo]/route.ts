import { getEnv } from "~/env";
import { isAdminRequest } from "~/server/admin-auth";
import { getAppContext } from "~/server/app-context";
import { isDomainError } from "~/server/errors";
import { adminActionInput, runAdminAction } from "~/server/provider/admin";

export const dynamic = "force-dynamic";

/** The admin page's fault buttons (plain forms). Answers with a redirect back to the page. */
export async function POST(req: Request, { params }: { params: Promise<{ outTradeNo: string }> }) {
  const { outTradeNo } = await params;
  if (!isAdminRequest(req.headers, getEnv().ADMIN_TOKEN))
    return new Response("admin token required", { status: 401 });
  const parsed = adminActionInput.safeParse(Object.fromEntries(await req.formData()));
  const back = (message: string) =>
    new Response(null, {
      status: 303,
      headers: { location: `/provider/admin?message=${encodeURIComponent(message)}#trade-${outTradeNo}` },
    });
  if (!parsed.success) return back(`invalid action: ${parsed.error.issues[0]?.message ?? "?"}`);
  const app = getAppContext();
  try {
    const results = await runAdminAction(app.db, app.provider.appId, outTradeNo, parsed.data, app.provider);
    const acknowledged = results.filter((r) => r.ok).length;
    return back(
      results.length
        ? `${parsed.data.action}: ${results.length} sent, ${acknowledged} acknowledged by the merchant`
        : `${parsed.data.action}: done`,
    );
  } catch (error) {
    return back(isDomainError(error) ? error.message : "the action failed");
  }
}
