import { type NextRequest, NextResponse } from "next/server";
import { newShopper, requestOf } from "./server/admission/admission";
import { getAppContext } from "./server/app-context";
import { isDomainError } from "./server/errors";
import {
  SESSION_COOKIE,
  SESSION_ROTATE_AFTER_MS,
  sessionCookieHeader,
  signSession,
} from "./server/session/session";
import {
  ADMIN_UNAUTHORIZED_HTML,
  adminCookieHeader,
  isAdminRequest,
  isAdminToken,
} from "./shared/admin-auth";
import { isHttps } from "./shared/client-address";

const ADMIN_PAGES = /^\/(admin|provider\/admin)(\/|$)/;

/** Operator pages need the admin token; `?token=` once sets it as a cookie. */
function guardAdmin(request: NextRequest): NextResponse | undefined {
  if (!ADMIN_PAGES.test(request.nextUrl.pathname)) return undefined;
  const token = getAppContext().adminToken;
  const given = request.nextUrl.searchParams.get("token");
  if (given !== null) {
    const clean = request.nextUrl.clone();
    clean.searchParams.delete("token");
    if (!isAdminToken(given, token))
      return new NextResponse(ADMIN_UNAUTHORIZED_HTML, {
        status: 401,
        headers: { "content-type": "text/html" },
      });
    const response = NextResponse.redirect(clean, 303);
    response.headers.append("set-cookie", adminCookieHeader(token, isHttps(request.headers)));
    return response;
  }
  if (isAdminRequest(request.headers, token)) return undefined;
  return new NextResponse(ADMIN_UNAUTHORIZED_HTML, { status: 401, headers: { "content-type": "text/html" } });
}

/**
 * Gives every visitor a signed guest session on the first page they open — as many as the gateway lets one
 * client address make (past that, the page is served without one); guards the operator pages.
 */
export async function proxy(request: NextRequest) {
  const denied = guardAdmin(request);
  if (denied) return denied;
  const app = getAppContext();
  // A revoked cookie (its shopper signed out everywhere else) is no session: its holder becomes a new guest.
  // With the database away the signature alone decides here; every API call checks the revocation again.
  const page = await requestOf(app, request.headers, {
    credential: "cookie",
    databaseAway: "trust-signature",
  });
  if (page.shopper) {
    if (Date.now() - page.shopper.issuedMs <= SESSION_ROTATE_AFTER_MS) return NextResponse.next();
    return withSession(request, signSession(page.shopper.userId, app.sessionSecret));
  }
  try {
    return withSession(request, signSession(await newShopper(page), app.sessionSecret));
  } catch (error) {
    if (isDomainError(error, "RATE_LIMITED")) return NextResponse.next();
    throw error;
  }
}

/** The page goes on with this session (the request sees it as its cookie) and the browser keeps it. */
function withSession(request: NextRequest, value: string): NextResponse {
  request.cookies.set(SESSION_COOKIE, value);
  const response = NextResponse.next({ request: { headers: request.headers } });
  response.headers.append("set-cookie", sessionCookieHeader(value, isHttps(request.headers)));
  // A page that hands out a session must never be kept by a shared cache (it would hand out that session).
  response.headers.set("cache-control", "private, no-store");
  return response;
}

export const config = {
  // API routes make their own session when needed; static files need none.
  matcher: ["/((?!api/|provider/api/|_next/static|_next/image|favicon.ico).*)"],
};
