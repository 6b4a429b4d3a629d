import { getEnv } from "~/env";
import { isDomainError } from "~/server/errors";
import { isAdminRequest } from "~/shared/admin-auth";

/**
 * An operations page button (a plain form post): the admin token, then the action,
 * then back to /admin with what happened. A domain refusal is the message, not an error page.
 */
export async function adminAction(req: Request, action: () => Promise<string>): Promise<Response> {
  if (!isAdminRequest(req.headers, getEnv().ADMIN_TOKEN)) {
    return new Response("admin token required", { status: 401 });
  }
  let message: string;
  try {
    message = await action();
  } catch (error) {
    if (!isDomainError(error)) throw error;
    message = `${error.code}: ${error.message}`;
  }
  return new Response(null, {
    status: 303,
    headers: { location: `/admin?message=${encodeURIComponent(message)}` },
  });
}
