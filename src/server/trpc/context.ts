import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import {
  newGuestId,
  readCookie,
  SESSION_COOKIE,
  sessionCookieHeader,
  signSession,
  verifySession,
} from "~/server/session/session";

export interface TrpcContext {
  app: AppContext;
  userId: string;
  /** Correlates log lines of one HTTP request. */
  requestId: string;
}

/**
 * The proxy gives every browser a guest session on its first visit; a client
 * that arrives without one (curl, a test) gets one here, sent back as a cookie.
 */
export function createTrpcContext(app: AppContext, req: Request, resHeaders: Headers): TrpcContext {
  let userId = verifySession(readCookie(req.headers.get("cookie"), SESSION_COOKIE), app.sessionSecret);
  if (!userId) {
    userId = newGuestId();
    resHeaders.append(
      "set-cookie",
      sessionCookieHeader(signSession(userId, app.sessionSecret), app.secureCookies),
    );
  }
  return { app, userId, requestId: req.headers.get("x-request-id") ?? randomUUID() };
}
