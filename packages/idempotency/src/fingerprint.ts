import { createHash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted, `undefined` members dropped, numbers in
 * JavaScript's shortest round-trip form (so 1, 1.0 and 1e0 are one value, and
 * -0 is 0). Non-finite numbers, bigints and functions are refused rather than
 * silently turned into something else.
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("cannot fingerprint a non-finite number");
      return JSON.stringify(Object.is(value, -0) ? 0 : value);
    case "object": {
      if (value instanceof Date) return JSON.stringify(value.toISOString());
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
    }
    default:
      throw new TypeError(`cannot fingerprint a value of type ${typeof value}`);
  }
}

/** What "the same request" means: sha256 over the operation and its canonical input. */
export function fingerprint(bizType: string, request: unknown): string {
  return createHash("sha256").update(bizType).update("\n").update(canonicalJson(request)).digest("hex");
}
