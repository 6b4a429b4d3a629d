import { inProgress, keyReused } from "./errors";
import { replay } from "./record";
import { cacheKeyOf, type ReplayCache } from "./replay-cache";
import type { Call, IdempotentResult, Remember } from "./types";

/**
 * The look-up phase with a replay cache: an outcome this instance knows is answered from memory; a key
 * already running here is waited for (no connection taken; for at most the call's `waitMs`, then it is
 * REQUEST_IN_PROGRESS) and then looked up again; otherwise the call runs (`claimed`) and what it learns (its
 * own outcome, or the one it replayed) is kept.
 */
export async function throughCache<T, Tx>(
  cache: ReplayCache,
  call: Call<T, Tx>,
  claimed: (call: Call<T, Tx>) => Promise<IdempotentResult<T>>,
): Promise<IdempotentResult<T>> {
  const { op, requestFingerprint, trace } = call;
  const key = cacheKeyOf(op.scope, op.bizType, op.key);
  const remember: Remember = (outcome) => {
    const text = JSON.stringify(outcome.responseBody);
    cache.put(
      key,
      {
        fingerprint: requestFingerprint,
        status: outcome.status,
        // What a database replay returns: the stored text parsed (no Dates, no undefined members).
        responseBody: text === undefined ? null : JSON.parse(text),
        answerVersion: outcome.answerVersion,
        bizId: outcome.bizId,
        expiresAt: outcome.expiresAt,
      },
      outcome.askedAt,
      outcome.remainingMs,
      text?.length ?? 4,
    );
  };
  for (;;) {
    const hit = cache.get(key);
    if (hit) {
      if (hit.fingerprint !== requestFingerprint) throw keyReused(hit.expiresAt);
      trace.by ??= "cache";
      return replay<T>(hit, op);
    }
    const flight = await cache.once(key, () => claimed({ ...call, remember }), call.config.waitMs);
    if (flight.ran) return flight.value;
    if ("waitedOut" in flight) throw inProgress(undefined);
    // Another copy of this request was running in this instance: this one waited for it.
    trace.waited = true;
    trace.by = "flight";
  }
}
