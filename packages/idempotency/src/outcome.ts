import { replayedRefusal, storedRefusal } from "./errors";
import type { RecordRow } from "./record";
import type {
  Answered,
  Held,
  IdempotentOperation,
  IdempotentResult,
  KeyRef,
  StoredOutcome,
  StoredRefusal,
} from "./types";
import { versionOf } from "./types";

/**
 * The outcomes under a key, and the answers made from them. Every claim path answers with the outcome it
 * stored or read (`Answered`, or a refusal carrying it), and the look-up phase keeps that in the replay cache
 * (./look-up.ts), in one place.
 */

/** A first execution, committed with its outcome: the answer and the outcome (`text`: the answer as stored). */
export function firstAnswer<T>(
  op: KeyRef,
  result: T,
  bizId: string | null,
  held: Held,
  text?: string,
): Answered<T> {
  const { expiresAt, remainingMs, askedAt } = held;
  return {
    result: { result, bizId, replayed: false, keyExpiresAt: expiresAt },
    outcome: {
      status: "SUCCESS",
      responseBody: result ?? null,
      responseText: text,
      answerVersion: versionOf(op),
      bizId,
      expiresAt,
      remainingMs,
      askedAt,
    },
  };
}

/** A declared refusal, stored under the key just now: the error to throw, carrying its outcome. */
export function refusalStored(op: KeyRef, body: StoredRefusal, held: Held, cause: unknown): Error {
  const { expiresAt, remainingMs, askedAt } = held;
  const outcome: StoredOutcome = {
    status: "FAILED",
    responseBody: body,
    answerVersion: versionOf(op),
    bizId: null,
    expiresAt,
    remainingMs,
    askedAt,
  };
  return storedRefusal(op, outcome, cause);
}

/** The outcome a record holds; undefined while it is PROCESSING. */
export function storedOutcomeOf(existing: RecordRow): StoredOutcome | undefined {
  if (existing.status === "PROCESSING") return undefined;
  return {
    status: existing.status,
    responseBody: existing.response_body,
    answerVersion: existing.answer_version,
    bizId: existing.biz_id,
    expiresAt: new Date(existing.expires_at),
    remainingMs: existing.remaining_ms,
    askedAt: existing.askedAt ?? 0,
  };
}

/** A stored outcome, answered again: a success as this code reads it, a refusal thrown as it was stored. */
export function replay<T>(
  outcome: Pick<StoredOutcome, "status" | "responseBody" | "bizId" | "expiresAt" | "answerVersion">,
  op: Pick<IdempotentOperation<T, unknown>, "answerVersion" | "upgradeAnswer">,
): IdempotentResult<T> {
  if (outcome.status === "FAILED")
    throw replayedRefusal(outcome.responseBody as StoredRefusal, outcome.expiresAt);
  // Stored by an older deploy in another shape: read as this code answers it, if it says how.
  const upgrade = outcome.answerVersion < versionOf(op) ? op.upgradeAnswer : undefined;
  return {
    result: upgrade ? upgrade(outcome.responseBody, outcome.answerVersion) : (outcome.responseBody as T),
    replayed: true,
    bizId: outcome.bizId,
    keyExpiresAt: outcome.expiresAt,
  };
}

/** An outcome read from the record of `op`'s key, answered again: `replay`, with the outcome beside the answer or on the refusal. */
export function replayStored<T>(outcome: StoredOutcome, op: IdempotentOperation<T, never>): Answered<T> {
  if (outcome.status === "FAILED")
    throw replayedRefusal(outcome.responseBody as StoredRefusal, outcome.expiresAt, {
      of: op,
      stored: outcome,
    });
  return { result: replay<T>(outcome, op), outcome };
}
