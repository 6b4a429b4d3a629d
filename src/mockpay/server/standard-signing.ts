import { createHmac, createPrivateKey, generateKeyPairSync, randomBytes, sign } from "node:crypto";

/**
 * MockPay's side of Standard Webhooks (https://www.standardwebhooks.com): the signature a sender puts in
 * `webhook-signature` over `<webhook-id>.<webhook-timestamp>.<body>`, one entry per key it signs with, separated
 * by spaces (how a rotation overlaps). The merchant checks them with the `standardwebhooks` package (v1) and
 * Node's crypto (v1a); the vectors in test/vectors/standard-webhooks.json hold both sides to the same cases.
 */
export interface SigningKey {
  scheme: "v1" | "v1a";
  /** `whsec_<base64>` (v1), or `whsk_<base64 of the 32-byte ed25519 seed>` (v1a). */
  secret: string;
}

export function standardSignature(id: string, timestampS: number, body: string, keys: readonly SigningKey[]) {
  const content = `${id}.${timestampS}.${body}`;
  return keys
    .map((key) => {
      if (key.scheme === "v1") {
        const secret = Buffer.from(key.secret.replace(/^whsec_/, ""), "base64");
        return `v1,${createHmac("sha256", secret).update(content).digest("base64")}`;
      }
      return `v1a,${sign(null, Buffer.from(content), ed25519PrivateKey(key.secret)).toString("base64")}`;
    })
    .join(" ");
}

/** A new key: a 24-byte `whsec_` secret for v1 (as the spec's examples), an ed25519 pair for v1a. */
export function newSigningKey(scheme: "v1" | "v1a"): SigningKey & { publicKey: string | null } {
  if (scheme === "v1")
    return { scheme, secret: `whsec_${randomBytes(24).toString("base64")}`, publicKey: null };
  const jwk = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" });
  return {
    scheme,
    secret: `whsk_${Buffer.from(jwk.d ?? "", "base64url").toString("base64")}`,
    publicKey: `whpk_${Buffer.from(jwk.x ?? "", "base64url").toString("base64")}`,
  };
}

/** The `whpk_` public half of a `whsk_` key. */
export function publicKeyOf(secret: string): string {
  const jwk = ed25519PrivateKey(secret).export({ format: "jwk" });
  return `whpk_${Buffer.from(jwk.x ?? "", "base64url").toString("base64")}`;
}

function ed25519PrivateKey(secret: string) {
  const seed = Buffer.from(secret.replace(/^whsk_/, ""), "base64");
  if (seed.length !== 32) throw new Error("a whsk_ key is the 32-byte ed25519 seed, base64");
  // Node derives the public half from the seed: a JWK needs it, so a PKCS#8 wrapping of the seed is used instead.
  const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
  return createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" });
}
