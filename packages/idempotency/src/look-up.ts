import { claimed } from "./claim";
import { IdempotencyError, inProgress, keyReused } from "./errors";
import { fingerprint } from "./fingerprint";
import { replay } from "./outcome";
import { cacheKeyOf, type ReplayCache } from "./replay-cache";
import { traced } from "./trace";
import type {
  Call,
  IdempotencyConfig,
  IdempotentRequest,
  IdempotentResult,
  RecordStore,
  Served,
  StoredOutcome,
  Trace,
} from "./types";

/**
 * The look-up phase, and the whole of one request from it (run.ts, `serveIdempotent`):
 *   - a known replay: a copy of a text this instance answered before is answered with that answer's rendering,
 *     once the transport admitted it (no reading, validation or hashing);
 *   - else the request read into its operation, and its fingerprint taken;
 *   - with a replay cache: an outcome this instance knows is answered from memory; a key already running here
 *     is waited for (no connection taken; for at most the call's `waitMs`, then it is REQUEST_IN_PROGRESS) and
 *     looked up again; else the call is claimed (./claim.ts), and what it learns, its own outcome or the one it
 *     replayed, is kept: the one place the cache is told an outcome;
 *   - the result rendered by the transport, and a replay's rendering kept for the next known replay.
 * The trace says when the call reached its key, and what its run answered before the rendering (the observer's).
 */
export async function lookedUp<T, Tx, R>(
  store: RecordStore<Tx>,
  request: IdempotentRequest<T, Tx, R>,
  config: IdempotencyConfig,
  trace: Trace,
): Promise<Served<R>> {
  const cache = config.cache;
  const text = cache ? request.text : undefined;
  if (cache && text !== undefined) {
    const known = cache.rendered(cacheKeyOf(request.scope, request.bizType, request.key), text);
    if (known) {
      await request.admit?.();
      trace.begunAt = Date.now();
      trace.by = "known";
      trace.ran = { replayed: true, at: trace.begunAt };
      return { rendering: known.rendering as R, replayed: true };
    }
  }
  const op = await request.operation();
  trace.begunAt = Date.now();
  if (op.scope !== request.scope || op.bizType !== request.bizType || op.key !== request.key)
    throw new Error(`the request read is under another key than the one it came with (${request.bizType})`);
  const call: Call<T, Tx> = {
    store,
    op: traced(op, trace),
    requestFingerprint: fingerprint(op.bizType, op.request),
    config,
    trace,
  };
  const result = cache ? await throughCache(cache, call) : (await claimed(call)).result;
  trace.ran = { replayed: result.replayed, at: Date.now() };
  const rendered = request.render(result);
  const replayed = rendered.replayed ?? result.replayed;
  if (cache && text !== undefined && replayed)
    cache.keepRendering(
      cacheKeyOf(op.scope, op.bizType, op.key),
      call.requestFingerprint,
      text,
      rendered.rendering,
      rendered.chars,
    );
  return { rendering: rendered.rendering, replayed };
}

/** An outcome this instance knows, else the flight of the key on this instance, else the call claimed and kept. */
export async function throughCache<T, Tx>(
  cache: ReplayCache,
  call: Call<T, Tx>,
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
    const flight = cache.board(key, call.config.waitMs);
    if ("land" in flight) {
      try {
        return await keeping(cache, key, call);
      } finally {
        flight.land();
      }
    }
    if (!(await flight.landed)) throw inProgress(undefined);
    // Another copy of this request was running in this instance: this one waited for it.
    trace.waited = true;
    trace.by = "flight";
  }
}

/**
 * Claims the call and keeps what it learnt: the outcome now final under the key, its own or the one it replayed,
 * beside its answer or on its refusal (a refusal about another key, thrown by the operation's own code, is not
 * kept).
 */
async function keeping<T, Tx>(
  cache: ReplayCache,
  key: string,
  call: Call<T, Tx>,
): Promise<IdempotentResult<T>> {
  try {
    const answered = await claimed(call);
    keep(cache, key, call.requestFingerprint, answered.outcome);
    return answered.result;
  } catch (error) {
    if (error instanceof IdempotencyError && error.outcome?.of === call.op)
      keep(cache, key, call.requestFingerprint, error.outcome.stored);
    throw error;
  }
}

function keep(cache: ReplayCache, key: string, requestFingerprint: string, outcome: StoredOutcome): void {
  const text = outcome.responseText ?? JSON.stringify(outcome.responseBody);
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
