import { eq, sql } from "drizzle-orm";
import { LRUCache } from "lru-cache";
import type { Executor } from "~/server/db/client";
import { apiTokenRevocation } from "~/server/db/schema";
import {
  type AcceptedSecrets,
  type ApiTokenClaims,
  type SessionClaims,
  signApiToken,
  verifyApiToken,
  verifySession,
} from "./session";

/** A new bearer token for the shopper, shown once when they ask for it. */
export function issueApiToken(userId: string, secret: string, ttlS: number) {
  const issuedMs = Date.now();
  return { token: signApiToken(userId, secret, issuedMs), expiresAt: new Date(issuedMs + ttlS * 1000) };
}

/**
 * What this instance last read of each shopper's revocation (ms, or 0 for none), for a second: a
 * request with a token then needs no database read. A revocation takes effect at once on the instance
 * that made it (it forgets its entry) and within REVOCATION_CACHE_MS on the others.
 */
export const REVOCATION_CACHE_MS = 1_000;
const revocations = new LRUCache<string, { revokedBeforeMs: number }>({
  max: 50_000,
  ttl: REVOCATION_CACHE_MS,
});

/**
 * Every credential the shopper holds now, API tokens and session cookies alike, is refused from here on
 * ("sign out everywhere"); those issued later work. Returns the moment, as the database's clock has it: a
 * credential issued for the caller after it must be issued later than that.
 */
export async function revokeCredentials(db: Executor, userId: string): Promise<Date> {
  const [row] = await db
    .insert(apiTokenRevocation)
    .values({ userId, revokedBefore: sql`clock_timestamp()` })
    .onConflictDoUpdate({ target: apiTokenRevocation.userId, set: { revokedBefore: sql`clock_timestamp()` } })
    .returning({ revokedBefore: apiTokenRevocation.revokedBefore });
  revocations.delete(userId);
  return row?.revokedBefore ?? new Date();
}

/** Whether a credential of this shopper issued at `issuedMs` was revoked since (cached for a second). */
async function revoked(db: Executor, userId: string, issuedMs: number): Promise<boolean> {
  let known = revocations.get(userId);
  if (!known) {
    const [revocation] = await db
      .select({ revokedBefore: apiTokenRevocation.revokedBefore })
      .from(apiTokenRevocation)
      .where(eq(apiTokenRevocation.userId, userId));
    known = { revokedBeforeMs: revocation?.revokedBefore.getTime() ?? 0 };
    revocations.set(userId, known);
  }
  return issuedMs <= known.revokedBeforeMs && known.revokedBeforeMs > 0;
}

/** The token's claims if it is genuine, unexpired and not revoked; otherwise null. */
export async function checkApiToken(
  db: Executor,
  token: string | undefined | null,
  secret: AcceptedSecrets,
  ttlS: number,
): Promise<ApiTokenClaims | null> {
  const claims = verifyApiToken(token, secret, ttlS);
  if (!claims) return null;
  return (await revoked(db, claims.userId, claims.issuedMs)) ? null : claims;
}

/** The session cookie's claims if it is genuine and not revoked; otherwise null (a new guest then). */
export async function checkSession(
  db: Executor,
  value: string | undefined | null,
  secret: AcceptedSecrets,
): Promise<SessionClaims | null> {
  const claims = verifySession(value, secret);
  if (!claims) return null;
  return (await revoked(db, claims.userId, claims.issuedMs)) ? null : claims;
}
