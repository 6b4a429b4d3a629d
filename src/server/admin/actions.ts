import { isDomainError, unavailableIfTransient } from "~/server/errors";
import { isAdminRequest } from "~/shared/admin-auth";

/**
 * An operations page button (a plain form post): the admin token, then the action,
 * then back to /admin with what happened. A domain refusal is the message, not an error page.
 */
export async function adminAction(
  req: Request,
  adminToken: string,
  action: () => Promise<string>,
): Promise<Response> {
  if (!isAdminRequest(req.headers, adminToken)) {
    return new Response("admin token required", { status: 401 });
  }
  let message: string;
  try {
    message = await action();
  } catch (error) {
    // A database that went away mid-action is "try again" (SERVICE_UNAVAILABLE), not an error page.
    const known = unavailableIfTransient(error);
    if (!isDomainError(known)) throw error;
    message = `${known.code}: ${known.message}`;
  }
  return new Response(null, {
    status: 303,
    headers: { location: `/admin?message=${encodeURIComponent(message)}` },
  });
}
