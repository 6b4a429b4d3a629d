import { IdempotencyError } from "./errors";
import { ABSORBERS, type IdempotencyOutcome } from "./events";
import { lookedUp } from "./look-up";
import {
  DEFAULT_IDEMPOTENCY_CONFIG,
  type IdempotencyConfig,
  type IdempotentOperation,
  type IdempotentRequest,
  type IdempotentResult,
  type RecordStore,
  type Served,
  type Trace,
} from "./types";

/**
 * Runs an operation once per key (docs/idempotency.md walks these phases):
 *   1 look up   the request's fingerprint; this instance's replay cache, if it has one (./look-up.ts)
 *   2 claim     the key, on the path chosen once (./claim.ts): with a lease, alone in a transaction, or in a
 *               batch; a copy that finds an outcome stored answers it (./existing-record.ts, ./outcome.ts)
 *   3 execute   the business writes, in the transaction that will store the outcome
 *   4 store     the outcome with COMMIT: a success, or a declared refusal; any other failure frees the key
 *   5 answer    the result, or the refusal, and tell the observer what happened
 */
export async function runIdempotent<T, Tx>(
  store: RecordStore<Tx>,
  op: IdempotentOperation<T, Tx>,
  config: IdempotencyConfig = DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<IdempotentResult<T>> {
  const served = await serveIdempotent(
    store,
    { scope: op.scope, bizType: op.bizType, key: op.key, operation: () => op, render: asItIs },
    config,
  );
  return served.rendering;
}

const asItIs = <T>(result: IdempotentResult<T>) => ({ rendering: result, chars: 0 });

/**
 * One request through the same phases, from the text its transport holds to the answer the transport sends:
 * a known replay (a copy of a text answered before) is answered before the request is read; any other is read
 * (`request.operation`), run once per key, rendered (`request.render`), and a replay's rendering kept for the
 * next copy of its text. One call into the look-up phase, which holds all of it (./look-up.ts).
 */
export async function serveIdempotent<T, Tx, R>(
  store: RecordStore<Tx>,
  request: IdempotentRequest<T, Tx, R>,
  config: IdempotencyConfig = DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<Served<R>> {
  const trace: Trace = { waited: false };
  // Timed from the moment the call reached its key to its answer (reading, admission and rendering are the transport's).
  const answered = (outcome: IdempotencyOutcome) => {
    const absorbedBy = absorberOf(outcome, trace);
    config.observe?.({
      bizType: request.bizType,
      key: request.key,
      scope: request.scope,
      outcome,
      durationMs: (trace.ran?.at ?? Date.now()) - (trace.begunAt ?? Date.now()),
      ...(absorbedBy ? { absorbedBy } : {}),
    });
  };
  const succeeded = (replayed: boolean) =>
    answered(replayed ? (trace.waited ? "waited" : "replayed") : trace.business ? "replayed" : "first");
  let served: Served<R>;
  try {
    served = await lookedUp(store, request, config, trace);
  } catch (error) {
    // A request refused before it reached its key (not admitted, or not valid) is not an outcome under it; a run
    // that answered is told as it answered, whatever its rendering did.
    if (trace.ran) succeeded(trace.ran.replayed);
    else if (trace.begunAt !== undefined) answered(outcomeOfFailure(error));
    throw error;
  }
  succeeded(trace.ran?.replayed ?? served.replayed);
  return served;
}

/** What answered a copy that did not run: a replay's source (the record unless the trace says otherwise), or a refusal's reason. */
function absorberOf(outcome: IdempotencyOutcome, trace: Trace): string | undefined {
  if (outcome === "mismatch") return ABSORBERS.fingerprint;
  if (outcome === "conflict") return ABSORBERS.conflict;
  if (outcome === "replayed" && trace.business) return trace.business;
  if (outcome === "replayed" || outcome === "waited" || outcome === "replayed_error")
    return ABSORBERS[trace.by ?? "record"];
  return undefined;
}

function outcomeOfFailure(error: unknown): IdempotencyOutcome {
  if (!(error instanceof IdempotencyError)) return "released";
  if (error.details.replayed) return "replayed_error";
  switch (error.code) {
    case "IDEMPOTENCY_KEY_REUSED":
      return "mismatch";
    case "REQUEST_IN_PROGRESS":
    case "IDEMPOTENCY_LEASE_LOST":
      return "conflict";
    case "SERVICE_UNAVAILABLE":
      return "unavailable";
    default:
      // A declared refusal, stored just now (the core's own refusals are the codes above).
      return "stored_error";
  }
}
