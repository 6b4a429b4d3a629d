import { randomUUID } from "node:crypto";
import type { AppContext } from "~/server/app-context";
import { unavailableIfTransient } from "~/server/errors";
import { checkApiToken, checkSession } from "~/server/session/api-tokens";
import { newGuestId, readCookie, SESSION_COOKIE, verifySession } from "~/server/session/session";
import { clientAddressOf } from "~/shared/client-address";
import type { HeaderReader } from "~/shared/plain-http";

/**
 * Request policy, in one place for every entry (tRPC, REST, the proxy): what a request is (`requestOf`),
 * whether it may go on (`admit`), and a new shopper when it has none (`newShopper`). The gateway is called
 * from `admit` alone, and a shopper id is made in `newShopper` alone (test/admission.test.ts counts them).
 */

/** A request as every entry sees it: from where, under which id, and as whom (if its credential holds). */
export interface RequestContext {
  app: AppContext;
  /** Correlates log lines of one HTTP request (the client's x-request-id, or a new one). */
  requestId: string;
  /** Who the client is on the network (src/shared/client-address.ts): the gateway limits writes by it. */
  clientAddress: string;
  /** The shopper its credential names: genuine, unexpired and not revoked. */
  shopper?: { userId: string; issuedMs: number };
}

export interface CredentialPolicy {
  /** A session cookie (the shop's pages and tRPC) or a bearer token (REST). */
  credential: "cookie" | "bearer";
  /**
   * Whether a credential was revoked is the database's to say. Away, an API call refuses (a retryable 503);
   * a page (the proxy) trusts the signature alone, and the API call that follows asks again.
   */
  databaseAway: "refuse" | "trust-signature";
}

/**
 * What a request is: the one function that reads identity, client address and request id from one. A transport
 * that has already named the request (REST answers with its id) hands that id in.
 */
export async function requestOf(
  app: AppContext,
  headers: HeaderReader,
  policy: CredentialPolicy,
  requestId = requestIdOf(headers),
): Promise<RequestContext> {
  const base = {
    app,
    requestId,
    clientAddress: clientAddressOf(headers),
  };
  const shopper = await credentialOf(app, headers, policy);
  return shopper ? { ...base, shopper } : base;
}

/** The client's x-request-id when it is a plain token (letters, digits, `._:-`, up to 128), else a new one. */
export function requestIdOf(headers: HeaderReader): string {
  const given = headers.get("x-request-id");
  return given && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
}

async function credentialOf(app: AppContext, headers: HeaderReader, policy: CredentialPolicy) {
  if (policy.credential === "bearer") {
    const token = headers.get("authorization")?.match(/^Bearer\s+(\S+)$/i)?.[1];
    return (await checkApiToken(app.db, token, app.sessionSecretsAccepted, app.apiTokenTtlS)) ?? undefined;
  }
  const cookie = readCookie(headers.get("cookie"), SESSION_COOKIE);
  try {
    return (await checkSession(app.db, cookie, app.sessionSecretsAccepted)) ?? undefined;
  } catch (error) {
    if (policy.databaseAway === "refuse") throw unavailableIfTransient(error);
    return verifySession(cookie, app.sessionSecretsAccepted) ?? undefined;
  }
}

/** What a request is about to do. */
export type Admission =
  /** Become a new shopper: limited per client address (new identities cost nothing). */
  | { action: "identity" }
  /**
   * Write: per client address (whoever the credential says the client is), then, unless the operation's
   * gateway is off, per shopper and operation, and per key (duplicate bursts).
   */
  | { action: "write"; route: string; userId: string; perShopper: boolean; key?: string };

/**
 * Lets the request go on, or throws RATE_LIMITED. The gateway is an optimisation, never the authority (the
 * idempotency core decides); an in-process caller (no client address) is no network client and is not
 * limited per address.
 */
export async function admit(
  request: Pick<RequestContext, "app"> & { clientAddress?: string },
  admission: Admission,
): Promise<void> {
  const { gateway } = request.app;
  if (admission.action === "identity") {
    if (request.clientAddress !== undefined)
      await gateway.admitClient({ address: request.clientAddress, action: "identity" });
    return;
  }
  if (request.clientAddress !== undefined)
    await gateway.admitClient({ address: request.clientAddress, action: "write", route: admission.route });
  if (admission.perShopper)
    await gateway.admit({
      userId: admission.userId,
      route: admission.route,
      ...(admission.key !== undefined ? { key: admission.key } : {}),
    });
}

/** A new guest shopper for a request that has none, as many as its client address may make. */
export async function newShopper(request: Pick<RequestContext, "app" | "clientAddress">): Promise<string> {
  await admit(request, { action: "identity" });
  return newGuestId();
}
