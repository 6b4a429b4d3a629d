import { inProgress, keyReused } from "./errors";
import { storedOutcomeOf } from "./outcome";
import { nextLease, type RecordRow } from "./record";
import type { Acquired, IdempotencyConfig, KeyRef, RecordStore } from "./types";
import { versionOf } from "./types";

/**
 * What a record found under the key means for the copy that found it, in this order:
 *   none        - freed between the claim and the read: claim again ("again")
 *   expired     - no live lease holds it: take it over for this request (a write, `takeOver`), or "again" when
 *                 another copy took it first
 *   another request's fingerprint - IDEMPOTENCY_KEY_REUSED
 *   an outcome  - answer it ("stored")
 *   a lapsed lease - take the key over as it is (a write, `renewLease`), or "again"
 *   a live lease - "again" (poll), or REQUEST_IN_PROGRESS once `deadline` has passed
 */
export async function decideOnRecord(
  store: RecordStore<unknown>,
  ref: KeyRef,
  existing: RecordRow | undefined,
  requestFingerprint: string,
  config: IdempotencyConfig,
  deadline: number,
): Promise<Acquired | "again"> {
  if (!existing) return "again";
  const record = { scope: existing.user_id, recordId: Number(existing.id), answerVersion: versionOf(ref) };
  if (existing.expired && !(existing.status === "PROCESSING" && existing.lease_live)) {
    const renewed = await nextLease(store, record, existing.lease_version, config, {
      fingerprint: requestFingerprint,
    });
    return renewed ? { kind: "owner", lease: renewed } : "again";
  }
  const expiresAt = new Date(existing.expires_at);
  if (existing.fingerprint !== requestFingerprint) throw keyReused(expiresAt);
  const outcome = storedOutcomeOf(existing);
  if (outcome) return { kind: "stored", outcome };
  if (!existing.lease_live) {
    const taken = await nextLease(store, record, existing.lease_version, config);
    return taken ? { kind: "owner", lease: taken } : "again";
  }
  if (deadline - Date.now() <= 0) throw inProgress(expiresAt);
  return "again";
}
