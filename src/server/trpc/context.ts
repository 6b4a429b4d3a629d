import { TRPCError } from "@trpc/server";
import { newShopper, requestOf } from "~/server/admission/admission";
import type { AppContext } from "~/server/app-context";
import { trpcCodeOf } from "~/server/error-codes";
import { isDomainError } from "~/server/errors";
import { SESSION_ROTATE_AFTER_MS, sessionCookieHeader, signSession } from "~/server/session/session";
import { isHttps } from "~/shared/client-address";
import type { HeaderReader } from "~/shared/plain-http";

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
  req: { headers: HeaderReader },
  resHeaders: Pick<Headers, "append">,
): Promise<TrpcContext> {
  const request = await requestOf(app, req.headers, { credential: "cookie", databaseAway: "refuse" }).catch(
    (error: unknown) => {
      throw asTrpcError(error);
    },
  );
  const issue = (userId: string, issuedMs = Date.now()) =>
    resHeaders.append(
      "set-cookie",
      sessionCookieHeader(signSession(userId, app.sessionSecret, issuedMs), isHttps(req.headers)),
    );
  const { shopper } = request;
  let userId = shopper?.userId;
  if (!userId) {
    userId = await newShopper(request).catch((error: unknown) => {
      throw asTrpcError(error);
    });
    issue(userId);
  } else if (shopper && Date.now() - shopper.issuedMs > SESSION_ROTATE_AFTER_MS) {
    // Issued anew on use once it is a day old: what the browser holds stays young (older copies still work
    // until the shopper signs out everywhere else, which ends every cookie issued before).
    issue(userId);
  }
  const owner = userId;
  return {
    app,
    userId: owner,
    requestId: request.requestId,
    clientAddress: request.clientAddress,
    renewSession: (afterMs) => issue(owner, Math.max(Date.now(), afterMs + 1)),
  };
}

/** A domain refusal raised while the context is made, as tRPC answers it (anything else stays as it is). */
function asTrpcError(error: unknown): unknown {
  if (!isDomainError(error)) return error;
  return new TRPCError({ code: trpcCodeOf(error.code), message: error.message, cause: error });
}
