import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { Webhook, WebhookVerificationError } from "standardwebhooks";

/**
 * Verifies a delivery signed as Standard Webhooks (https://www.standardwebhooks.com) describes: headers
 * `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature` (space-separated `v1,<base64>` and
 * `v1a,<base64>` signatures), over the content `<id>.<timestamp>.<body>`.
 * - `v1` (HMAC-SHA256 under a `whsec_` secret) is checked by the maintained `standardwebhooks` package, which
 *   also holds the timestamp to its five-minute window either way;
 * - `v1a` (ed25519 under a `whpk_` public key), which that package cannot check yet, by Node's own crypto, with
 *   the same window.
 * Several secrets and keys may be configured at once, so a sender can rotate them without downtime: a delivery is
 * genuine when any one of its signatures matches any one of them. The vectors in test/vectors/standard-webhooks.json
 * hold this to the cases another implementation should agree on.
 */
export type StandardWebhookCheck = "OK" | "UNSIGNED" | "BAD_SIGNATURE" | "STALE_TIMESTAMP";

export interface StandardWebhookHeaders {
  id: string | null;
  timestamp: string | null;
  signature: string | null;
}

export interface StandardWebhookKeys {
  /** `whsec_<base64>` secrets (the prefix may be left out), for `v1`. */
  secrets: readonly string[];
  /** `whpk_<base64 of the 32-byte ed25519 key>` public keys, for `v1a`. */
  publicKeys: readonly string[];
}

/** The window either side of the receiver's clock: the `standardwebhooks` package's own, five minutes. */
export const TOLERANCE_S = 5 * 60;

export function verifyStandardWebhook(
  headers: StandardWebhookHeaders,
  body: string,
  keys: StandardWebhookKeys,
): StandardWebhookCheck {
  const { id, timestamp, signature } = headers;
  // No key to check it with is no way to tell it from anyone's: as good as unsigned.
  if (keys.secrets.length === 0 && keys.publicKeys.length === 0) return "UNSIGNED";
  if (!id || !timestamp || !signature || !/^\d{1,12}$/.test(timestamp)) return "UNSIGNED";
  // The receiver's clock, as the package reads it too.
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_S) return "STALE_TIMESTAMP";
  const given = signature.split(" ").filter(Boolean);
  if (
    given.some((one) => one.startsWith("v1,")) &&
    keys.secrets.some((secret) => v1Matches(secret, headers, body))
  ) {
    return "OK";
  }
  const content = Buffer.from(`${id}.${timestamp}.${body}`);
  for (const one of given) {
    if (!one.startsWith("v1a,")) continue;
    const bytes = Buffer.from(one.slice(4), "base64");
    if (bytes.length !== 64) continue;
    if (keys.publicKeys.some((key) => verify(null, content, ed25519Key(key), bytes))) return "OK";
  }
  return "BAD_SIGNATURE";
}

function v1Matches(secret: string, headers: StandardWebhookHeaders, body: string): boolean {
  try {
    new Webhook(secret).verify(
      body,
      {
        "webhook-id": headers.id ?? "",
        "webhook-timestamp": headers.timestamp ?? "",
        // Only the v1 signatures: the package compares each entry whole.
        "webhook-signature": (headers.signature ?? "")
          .split(" ")
          .filter((one) => one.startsWith("v1,"))
          .join(" "),
      },
      { jsonParse: false },
    );
    return true;
  } catch (error) {
    if (error instanceof WebhookVerificationError) return false;
    throw error;
  }
}

const keyCache = new Map<string, KeyObject>();

/** A `whpk_` public key as Node's crypto takes it (a JWK of the raw 32 bytes). */
function ed25519Key(publicKey: string): KeyObject {
  let key = keyCache.get(publicKey);
  if (!key) {
    const raw = Buffer.from(publicKey.replace(/^whpk_/, ""), "base64");
    if (raw.length !== 32) throw new Error("an ed25519 public key (whpk_…) is 32 bytes, base64");
    key = createPublicKey({
      key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") },
      format: "jwk",
    });
    keyCache.set(publicKey, key);
  }
  return key;
}
