import { createPrivateKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SETTINGS } from "~/env";
import {
  type StandardWebhookCheck,
  type StandardWebhookKeys,
  verifyStandardWebhook,
} from "~/server/payments/standard-webhooks";

interface Case {
  name: string;
  scheme: "v1" | "v1a";
  verifyWith: StandardWebhookKeys;
  now: number;
  headers: Record<string, string>;
  payload: string;
  expected: "valid" | "bad_signature" | "stale_timestamp" | "missing_headers";
}
const vectors = JSON.parse(readFileSync("test/vectors/standard-webhooks.json", "utf8")) as {
  keys: { secret: string; oldSecret: string; secretKey: string };
  cases: Case[];
};
const OUTCOME: Record<Case["expected"], StandardWebhookCheck> = {
  valid: "OK",
  bad_signature: "BAD_SIGNATURE",
  stale_timestamp: "STALE_TIMESTAMP",
  missing_headers: "UNSIGNED",
};

afterEach(() => {
  vi.useRealTimers();
});

describe("Standard Webhooks test vectors (test/vectors/standard-webhooks.json)", () => {
  it("cover v1 and v1a, valid and not, and every outcome", () => {
    expect(vectors.cases.length).toBeGreaterThanOrEqual(20);
    expect(new Set(vectors.cases.map((c) => `${c.scheme}:${c.expected === "valid"}`))).toEqual(
      new Set(["v1:true", "v1:false", "v1a:true", "v1a:false"]),
    );
    expect(new Set(vectors.cases.map((c) => c.expected))).toEqual(new Set(Object.keys(OUTCOME)));
  });

  for (const vector of vectors.cases) {
    it(`${vector.name}: ${vector.expected}`, () => {
      vi.useFakeTimers({ toFake: ["Date"], now: vector.now * 1000 });
      const check = verifyStandardWebhook(
        {
          id: vector.headers["webhook-id"] ?? null,
          timestamp: vector.headers["webhook-timestamp"] ?? null,
          signature: vector.headers["webhook-signature"] ?? null,
        },
        vector.payload,
        vector.verifyWith,
      );
      expect(check).toBe(OUTCOME[vector.expected]);
    });
  }

  it("are what the standardwebhooks package and Node's crypto sign (the file is checked, not only read)", () => {
    const seed = Buffer.from(vectors.keys.secretKey.replace(/^whsk_/, ""), "base64");
    const key = createPrivateKey({
      key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]),
      format: "der",
      type: "pkcs8",
    });
    let checked = 0;
    for (const vector of vectors.cases) {
      const id = vector.headers["webhook-id"];
      const ts = vector.headers["webhook-timestamp"];
      if (!id || !ts) continue;
      const signatures = (vector.headers["webhook-signature"] ?? "").split(" ");
      for (const secret of [vectors.keys.secret, vectors.keys.oldSecret]) {
        const made = new Webhook(secret).sign(id, new Date(Number(ts) * 1000), vector.payload);
        if (signatures.includes(made)) checked++;
      }
      const v1a = `v1a,${sign(null, Buffer.from(`${id}.${ts}.${vector.payload}`), key).toString("base64")}`;
      if (signatures.includes(v1a)) checked++;
    }
    // Every valid case carries at least one signature made again here.
    expect(checked).toBeGreaterThanOrEqual(vectors.cases.filter((c) => c.expected === "valid").length);
  });
});

describe("the merchant's Standard Webhooks keys (settings)", () => {
  it("are refused at start-up when malformed, not at the first delivery", () => {
    const { PROVIDER_STANDARD_WEBHOOK_SECRETS: secrets, PROVIDER_STANDARD_WEBHOOK_PUBLIC_KEYS: keys } =
      SETTINGS.shape;
    expect(secrets.safeParse(`${vectors.keys.secret}, ${vectors.keys.oldSecret}`).success).toBe(true);
    expect(secrets.safeParse("").success).toBe(true);
    expect(secrets.safeParse("whsec_not base64!").success).toBe(false);
    expect(keys.safeParse("whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=").success).toBe(true);
    expect(keys.safeParse("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=").success).toBe(false);
    expect(keys.safeParse("whpk_AAAA").success).toBe(false);
  });
});
