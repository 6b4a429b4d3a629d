import { and, desc, eq, isNull, or, sql } from "drizzle-orm";
import { z } from "zod";
import type { MockPayDb, MockPayExecutor } from "./db";
import { MockPayError } from "./errors";
import { providerEndpoint, providerEndpointKey } from "./schema";
import { newSigningKey, type SigningKey } from "./standard-signing";

/**
 * MockPay's merchant endpoints: one per app and notify URL, made the first time something is sent there. Each
 * says how deliveries to it are signed (MockPay's own format, or Standard Webhooks with `v1` or `v1a` keys),
 * whether it is enabled (a 410 Gone disables it until a person enables it again) and until when it asked to be
 * left alone (429, 502, 504, Retry-After). Changed from MockPay's console (/provider/admin) and its CLI.
 */
export type Endpoint = typeof providerEndpoint.$inferSelect;

/** What a new endpoint starts as: MockPay's own format, or Standard Webhooks signed `v1` or `v1a`. */
export const ENDPOINT_MODES = ["legacy", "standard-v1", "standard-v1a"] as const;
export type EndpointMode = (typeof ENDPOINT_MODES)[number];

export interface EndpointDefaults {
  mode: EndpointMode;
  /**
   * The first `v1` secret of a new Standard Webhooks endpoint: the one the merchant was given
   * (PROVIDER_STANDARD_WEBHOOK_SECRETS), as the legacy secret is shared; a new one when there is none.
   */
  firstSecret?: string;
}

/** The endpoint for an app's notify URL, made (in `defaults.mode`) the first time it is asked for. */
export async function endpointFor(
  db: MockPayExecutor,
  appId: string,
  url: string,
  defaults: EndpointDefaults,
): Promise<Endpoint> {
  const [existing] = await db
    .select()
    .from(providerEndpoint)
    .where(and(eq(providerEndpoint.appId, appId), eq(providerEndpoint.url, url)));
  if (existing) return existing;
  const format = defaults.mode === "legacy" ? "legacy" : "standard";
  // The endpoint and its first key commit together: never a Standard Webhooks endpoint without a key to sign with.
  const made = await db.transaction(async (tx) => {
    const [inserted] = await tx
      .insert(providerEndpoint)
      .values({ appId, url, format })
      .onConflictDoNothing({ target: [providerEndpoint.appId, providerEndpoint.url] })
      .returning();
    if (inserted && defaults.mode !== "legacy") {
      await addKey(tx, inserted.id, schemeOf(defaults.mode), defaults.firstSecret);
    }
    return inserted;
  });
  // Two first deliveries at once: the other made it (its insert committed, with its key, before ours gave way).
  return made ?? endpointFor(db, appId, url, { mode: "legacy" });
}

/** The keys that sign a delivery to the endpoint now: every one not yet retired, oldest first. */
export async function signingKeys(db: MockPayExecutor, endpointId: string): Promise<SigningKey[]> {
  return db
    .select({ scheme: providerEndpointKey.scheme, secret: providerEndpointKey.secret })
    .from(providerEndpointKey)
    .where(
      and(
        eq(providerEndpointKey.endpointId, endpointId),
        or(isNull(providerEndpointKey.retiresAt), sql`${providerEndpointKey.retiresAt} > now()`),
      ),
    )
    .orderBy(providerEndpointKey.createdAt);
}

/**
 * Switches an endpoint's format. To Standard Webhooks with a scheme it has no current key for, a key is made
 * (printed by the console and the CLI, for the merchant to configure); keys of the other scheme retire at once.
 */
export async function setEndpointMode(db: MockPayDb, endpointId: string, mode: EndpointMode) {
  return db.transaction(async (tx) => {
    const endpoint = await lockEndpoint(tx, endpointId);
    await tx
      .update(providerEndpoint)
      .set({ format: mode === "legacy" ? "legacy" : "standard", updatedAt: sql`now()` })
      .where(eq(providerEndpoint.id, endpoint.id));
    if (mode === "legacy") return { endpoint, key: undefined };
    const scheme = schemeOf(mode);
    await tx
      .update(providerEndpointKey)
      .set({ retiresAt: sql`now()` })
      .where(
        and(
          eq(providerEndpointKey.endpointId, endpoint.id),
          sql`${providerEndpointKey.scheme} <> ${scheme}`,
          or(isNull(providerEndpointKey.retiresAt), sql`${providerEndpointKey.retiresAt} > now()`),
        ),
      );
    const [current] = await tx
      .select()
      .from(providerEndpointKey)
      .where(
        and(
          eq(providerEndpointKey.endpointId, endpoint.id),
          eq(providerEndpointKey.scheme, scheme),
          isNull(providerEndpointKey.retiresAt),
        ),
      );
    return { endpoint, key: current ?? (await addKey(tx, endpoint.id, scheme)) };
  });
}

/**
 * A rotation: a new key of the endpoint's scheme becomes current, and the keys it replaces retire `overlapS`
 * seconds from now. Until then every delivery carries both signatures, so a merchant that holds either key
 * accepts it, and the merchant can take up the new one without missing a delivery.
 */
export async function rotateEndpointKey(db: MockPayDb, endpointId: string, overlapS: number) {
  return db.transaction(async (tx) => {
    const endpoint = await lockEndpoint(tx, endpointId);
    const [current] = await tx
      .select()
      .from(providerEndpointKey)
      .where(and(eq(providerEndpointKey.endpointId, endpoint.id), isNull(providerEndpointKey.retiresAt)))
      .orderBy(desc(providerEndpointKey.createdAt));
    if (endpoint.format !== "standard" || !current) {
      throw new MockPayError(
        "INVALID_REQUEST",
        "only a Standard Webhooks endpoint has a key to rotate (switch it to standard-v1 or standard-v1a first)",
      );
    }
    const retiresAt = new Date(Date.now() + overlapS * 1000);
    await tx
      .update(providerEndpointKey)
      .set({ retiresAt })
      .where(and(eq(providerEndpointKey.endpointId, endpoint.id), isNull(providerEndpointKey.retiresAt)));
    return { endpoint, key: await addKey(tx, endpoint.id, current.scheme), retiresAt };
  });
}

/** A person enables an endpoint again (after a 410 Gone): what waited for it is sent at once. */
export async function enableEndpoint(db: MockPayDb, endpointId: string): Promise<Endpoint> {
  const [enabled] = await db
    .update(providerEndpoint)
    .set({ status: "ENABLED", disabledReason: null, pausedUntil: null, updatedAt: sql`now()` })
    .where(eq(providerEndpoint.id, endpointId))
    .returning();
  if (!enabled) throw new MockPayError("NOT_FOUND", `no endpoint ${endpointId}`);
  return enabled;
}

/** The endpoint answered 410 Gone: nothing more is sent to it until a person enables it. */
export async function disableEndpoint(db: MockPayExecutor, endpointId: string, reason: string) {
  await db
    .update(providerEndpoint)
    .set({ status: "DISABLED", disabledReason: reason, updatedAt: sql`now()` })
    .where(eq(providerEndpoint.id, endpointId));
}

/** The endpoint asked to be left alone (429, 502, 504, Retry-After) until `untilMs` from now. */
export async function pauseEndpoint(db: MockPayExecutor, endpointId: string, untilMs: number) {
  await db
    .update(providerEndpoint)
    .set({
      pausedUntil: sql`greatest(coalesce(${providerEndpoint.pausedUntil}, now()), now() + ${untilMs} * interval '1 millisecond')`,
      updatedAt: sql`now()`,
    })
    .where(eq(providerEndpoint.id, endpointId));
}

/** The console's and the CLI's list: every endpoint with its keys (retired ones too, with when). */
export async function listEndpoints(db: MockPayDb) {
  const endpoints = await db.select().from(providerEndpoint).orderBy(providerEndpoint.createdAt);
  const keys = await db.select().from(providerEndpointKey).orderBy(providerEndpointKey.createdAt);
  return endpoints.map((endpoint) => ({
    endpoint,
    keys: keys
      .filter((key) => key.endpointId === endpoint.id)
      .map(({ id, scheme, secret, publicKey, createdAt, retiresAt }) => ({
        id,
        scheme,
        // What the merchant is given: the secret for v1 (shared), only the public key for v1a.
        forMerchant: scheme === "v1" ? secret : publicKey,
        createdAt,
        retiresAt,
      })),
  }));
}

async function lockEndpoint(tx: MockPayExecutor, endpointId: string): Promise<Endpoint> {
  const [endpoint] = await tx
    .select()
    .from(providerEndpoint)
    .where(eq(providerEndpoint.id, endpointId))
    .for("update");
  if (!endpoint) throw new MockPayError("NOT_FOUND", `no endpoint ${endpointId}`);
  return endpoint;
}

async function addKey(db: MockPayExecutor, endpointId: string, scheme: "v1" | "v1a", secret?: string) {
  const key = scheme === "v1" && secret ? { scheme, secret, publicKey: null } : newSigningKey(scheme);
  const [added] = await db
    .insert(providerEndpointKey)
    .values({ endpointId, ...key })
    .returning();
  if (!added) throw new Error("the key was not stored");
  return added;
}

function schemeOf(mode: Exclude<EndpointMode, "legacy">): "v1" | "v1a" {
  return mode === "standard-v1" ? "v1" : "v1a";
}

/** What MockPay's console (and CLI) can do to one endpoint. */
export const endpointActionInput = z.discriminatedUnion("action", [
  z.object({ action: z.literal("MODE"), mode: z.enum(ENDPOINT_MODES) }),
  /** A new key; the current one keeps signing beside it for `overlapS` seconds (default a day). */
  z.object({
    action: z.literal("ROTATE"),
    overlapS: z.coerce.number().int().min(0).max(604_800).default(86_400),
  }),
  z.object({ action: z.literal("ENABLE") }),
]);
export type EndpointActionInput = z.infer<typeof endpointActionInput>;

/** Runs a console action; says what happened, and what the merchant must be given (a new key) when there is. */
export async function runEndpointAction(db: MockPayDb, endpointId: string, input: EndpointActionInput) {
  switch (input.action) {
    case "MODE": {
      const { key } = await setEndpointMode(db, endpointId, input.mode);
      return key
        ? `now ${input.mode}; give the merchant ${key.scheme === "v1" ? key.secret : key.publicKey}`
        : `now ${input.mode}`;
    }
    case "ROTATE": {
      const { key, retiresAt } = await rotateEndpointKey(db, endpointId, input.overlapS);
      return `rotated: give the merchant ${key.scheme === "v1" ? key.secret : key.publicKey}; the old key signs beside it until ${retiresAt.toISOString()}`;
    }
    case "ENABLE":
      await enableEndpoint(db, endpointId);
      return "enabled: what waited for it is sent now";
  }
}
