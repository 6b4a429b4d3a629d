import { type NextRequest, NextResponse } from "next/server";
import { getEnv } from "./env";
import {
  newGuestId,
  SESSION_COOKIE,
  sessionCookieHeader,
  signSession,
  verifySession,
} from "./server/session/session";

/** Gives every visitor a signed guest session on the first page they open. */
export function proxy(request: NextRequest) {
  const secret = getEnv().SESSION_SECRET;
  if (verifySession(request.cookies.get(SESSION_COOKIE)?.value, secret)) return NextResponse.next();
  const value = signSession(newGuestId(), secret);
  request.cookies.set(SESSION_COOKIE, value);
  const response = NextResponse.next({ request: { headers: request.headers } });
  response.headers.append("set-cookie", sessionCookieHeader(value, false));
  return response;
}

export const config = {
  // API routes make their own session when needed; static files need none.
  matcher: ["/((?!api/|provider/api/|_next/static|_next/image|favicon.ico).*)"],
};
