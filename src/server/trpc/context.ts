import { randomUUID } from "node:crypto";
import { TRPCError } from "@trpc/server";
import type { AppContext } from "~/server/app-context";
import { isDomainError } from "~/server/errors";
import {
  newGuestId,
  readCookie,
  SESSION_COOKIE,
  sessionCookieHeader,
  signSession,
  verifySession,
} from "~/server/session/session";
import { clientAddressOf, isHttps } from "~/shared/client-address";
import { TRPC_CODE_BY_DOMAIN_CODE } from "./codes";

export interface TrpcContext {
  app: AppContext;
  userId: string;
  /** Correlates log lines of one HTTP request. */
  requestId: string;
  /**
   * Who the client is on the network (src/shared/client-address.ts); the gateway limits its writes by
   * it. Absent for in-process callers (server-rendered pages, tests), which are no network client.
   */
  clientAddress?: string;
}

/**
 * The proxy gives every browser a guest session on its first visit; a client
 * that arrives without one (curl, a test) gets one here, sent back as a cookie —
 * as many as the gateway lets one client address make.
 */
export async function createTrpcContext(
  app: AppContext,
  req: Request,
  resHeaders: Headers,
): Promise<TrpcContext> {
  const clientAddress = clientAddressOf(req.headers);
  let userId = verifySession(readCookie(req.headers.get("cookie"), SESSION_COOKIE), app.sessionSecret);
  if (!userId) {
    try {
      await app.gateway.admitClient({ address: clientAddress, action: "identity" });
    } catch (error) {
      if (!isDomainError(error)) throw error;
      throw new TRPCError({
        code: TRPC_CODE_BY_DOMAIN_CODE[error.code],
        message: error.message,
        cause: error,
      });
    }
    userId = newGuestId();
    resHeaders.append(
      "set-cookie",
      sessionCookieHeader(signSession(userId, app.sessionSecret), isHttps(req.headers)),
    );
  }
  return { app, userId, requestId: req.headers.get("x-request-id") ?? randomUUID(), clientAddress };
}
