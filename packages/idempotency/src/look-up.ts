import { IdempotencyError, inProgress, keyReused } from "./errors";
import { ABSORBERS } from "./events";
import { fingerprint } from "./fingerprint";
import { replay } from "./outcome";
import { cacheKeyOf, type ReplayCache } from "./replay-cache";
import type { Answered, Call, IdempotencyConfig, IdempotentResult, KeyRef, StoredOutcome } from "./types";

/**
 * The look-up phase with a replay cache: an outcome this instance knows is answered from memory; a key
 * already running here is waited for (no connection taken; for at most the call's `waitMs`, then it is
 * REQUEST_IN_PROGRESS) and then looked up again; otherwise the call runs (`claimed`) and what it learns (its
 * own outcome, or the one it replayed) is kept.
 */
export async function throughCache<T, Tx>(
  cache: ReplayCache,
  call: Call<T, Tx>,
  claimed: (call: Call<T, Tx>) => Promise<Answered<T>>,
): Promise<IdempotentResult<T>> {
  const { op, requestFingerprint, trace } = call;
  const key = cacheKeyOf(op.scope, op.bizType, op.key);
  for (;;) {
    const hit = cache.get(key);
    if (hit) {
      if (hit.fingerprint !== requestFingerprint) throw keyReused(hit.expiresAt);
      trace.by ??= "cache";
      return replay<T>(hit, op);
    }
    const flight = await cache.once(key, () => keeping(cache, key, call, claimed), call.config.waitMs);
    if (flight.ran) return flight.value;
    if ("waitedOut" in flight) throw inProgress(undefined);
    // Another copy of this request was running in this instance: this one waited for it.
    trace.waited = true;
    trace.by = "flight";
  }
}

/**
 * Runs the call and keeps what it learnt: the outcome now final under the key, its own or the one it replayed,
 * beside its answer or on its refusal (a refusal about another key, thrown by the operation's own code, is not
 * kept). The one place the cache is told an outcome.
 */
async function keeping<T, Tx>(
  cache: ReplayCache,
  key: string,
  call: Call<T, Tx>,
  claimed: (call: Call<T, Tx>) => Promise<Answered<T>>,
): Promise<IdempotentResult<T>> {
  let answered: Answered<T>;
  try {
    answered = await claimed(call);
  } catch (error) {
    if (error instanceof IdempotencyError && error.outcome?.of === call.op)
      keep(cache, key, call.requestFingerprint, error.outcome.stored);
    throw error;
  }
  keep(cache, key, call.requestFingerprint, answered.outcome);
  return answered.result;
}

function keep(cache: ReplayCache, key: string, requestFingerprint: string, outcome: StoredOutcome): void {
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
}

/**
 * Phase 1 for a request answered before from the very same text (ReplayCache.rendered): the transport's
 * rendering of the outcome, once `admission` (the transport's admission of the copy) let it go on; told to the
 * observer as a known replay. Undefined: run the call (nothing was admitted).
 */
export async function knownReplay<R>(
  config: IdempotencyConfig,
  ref: KeyRef,
  requestText: string,
  admission: () => Promise<void>,
): Promise<{ rendering: R; keyExpiresAt: Date } | undefined> {
  const known = config.cache?.rendered(cacheKeyOf(ref.scope, ref.bizType, ref.key), requestText);
  if (!known) return undefined;
  await admission();
  config.observe?.({
    bizType: ref.bizType,
    key: ref.key,
    scope: ref.scope,
    outcome: "replayed",
    durationMs: 0,
    absorbedBy: ABSORBERS.known,
  });
  return { rendering: known.rendering as R, keyExpiresAt: known.outcome.expiresAt };
}

/**
 * Keeps a transport's rendering of a success it answered, under the request text it came from, for
 * `knownReplay`. `request` is the validated request the text meant: kept only if its fingerprint is the
 * one this instance holds the success for.
 */
export function keepRendering(
  config: IdempotencyConfig,
  ref: KeyRef,
  request: unknown,
  requestText: string,
  rendering: unknown,
  renderingChars: number,
): void {
  const cache = config.cache;
  if (!cache) return;
  cache.keepRendering(
    cacheKeyOf(ref.scope, ref.bizType, ref.key),
    fingerprint(ref.bizType, request),
    requestText,
    rendering,
    renderingChars,
  );
}
