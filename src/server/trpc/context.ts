import { randomUUID } from "node:crypto";
import { TRPCError } from "@trpc/server";
import type { AppContext } from "~/server/app-context";
import { isDomainError, unavailableIfTransient } from "~/server/errors";
import { checkSession } from "~/server/session/api-tokens";
import {
  newGuestId,
  readCookie,
  SESSION_COOKIE,
  SESSION_ROTATE_AFTER_MS,
  sessionCookieHeader,
  signSession,
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
  /**
   * Gives this client a fresh session cookie for the same shopper, issued after `afterMs` (a revocation's
   * moment, so the cookie outlives it). Absent for in-process callers, which have no cookie.
   */
  renewSession?: (afterMs: number) => void;
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
  // Whether the cookie was revoked is the database's to say: away, it is a retryable 503, never a 500.
  const session = await checkSession(
    app.db,
    readCookie(req.headers.get("cookie"), SESSION_COOKIE),
    app.sessionSecret,
  ).catch((error: unknown) => {
    throw asTrpcError(unavailableIfTransient(error));
  });
  const issue = (userId: string, issuedMs = Date.now()) =>
    resHeaders.append(
      "set-cookie",
      sessionCookieHeader(signSession(userId, app.sessionSecret, issuedMs), isHttps(req.headers)),
    );
  let userId = session?.userId;
  if (!userId) {
    await app.gateway.admitClient({ address: clientAddress, action: "identity" }).catch((error: unknown) => {
      throw asTrpcError(error);
    });
    userId = newGuestId();
    issue(userId);
  } else if (session && Date.now() - session.issuedMs > SESSION_ROTATE_AFTER_MS) {
    // Issued anew on use once it is a day old: what the browser holds stays young (older copies still work
    // until the shopper signs out everywhere else, which ends every cookie issued before).
    issue(userId);
  }
  const shopper = userId;
  return {
    app,
    userId: shopper,
    requestId: req.headers.get("x-request-id") ?? randomUUID(),
    clientAddress,
    renewSession: (afterMs) => issue(shopper, Math.max(Date.now(), afterMs + 1)),
  };
}

/** A domain refusal raised while the context is made, as tRPC answers it (anything else stays as it is). */
function asTrpcError(error: unknown): unknown {
  if (!isDomainError(error)) return error;
  return new TRPCError({ code: TRPC_CODE_BY_DOMAIN_CODE[error.code], message: error.message, cause: error });
}
