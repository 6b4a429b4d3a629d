import { claimInTransaction } from "./claim-in-transaction";
import { claimWithLease } from "./claim-with-lease";
import { IdempotencyError } from "./errors";
import { ABSORBERS, type IdempotencyOutcome } from "./events";
import { fingerprint } from "./fingerprint";
import { throughCache } from "./look-up";
import {
  type Call,
  type ClaimKind,
  DEFAULT_IDEMPOTENCY_CONFIG,
  type IdempotencyConfig,
  type IdempotentOperation,
  type IdempotentResult,
  type RecordStore,
  type Trace,
} from "./types";

/**
 * Runs an operation once per key (docs/idempotency.md walks these phases):
 *   1 look up   the request's fingerprint; this instance's replay cache, if it has one (./look-up.ts)
 *   2 claim     the key, by the operation's declared claim (./claim-in-transaction.ts, ./claim-with-lease.ts);
 *               a copy that finds an outcome stored answers it (./record.ts, settle and replay)
 *   3 execute   the business writes, in the transaction that will store the outcome
 *   4 store     the outcome with COMMIT: a success, or a declared refusal; any other failure frees the key
 *   5 answer    the result, or the refusal, and tell the observer what happened
 */
export async function runIdempotent<T, Tx>(
  store: RecordStore<Tx>,
  op: IdempotentOperation<T, Tx>,
  config: IdempotencyConfig = DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<IdempotentResult<T>> {
  const started = Date.now();
  const trace: Trace = { waited: false };
  const answered = (outcome: IdempotencyOutcome) => {
    const absorbedBy = absorberOf(outcome, trace);
    config.observe?.({
      bizType: op.bizType,
      key: op.key,
      scope: op.scope,
      outcome,
      durationMs: Date.now() - started,
      ...(absorbedBy ? { absorbedBy } : {}),
    });
  };
  try {
    const requestFingerprint = fingerprint(op.bizType, op.request);
    const call: Call<T, Tx> = {
      store,
      op: noting(op, trace),
      requestFingerprint,
      config,
      trace,
      remember: () => {},
    };
    const result = config.cache ? await throughCache(config.cache, call, claimed) : await claimed(call);
    answered(
      result.replayed ? (trace.waited ? "waited" : "replayed") : trace.business ? "replayed" : "first",
    );
    return result;
  } catch (error) {
    answered(outcomeOfFailure(error));
    throw error;
  }
}

/** The operation, its execution noting in the trace when its business object was there already. */
function noting<T, Tx>(op: IdempotentOperation<T, Tx>, trace: Trace): IdempotentOperation<T, Tx> {
  const execute = op.execute;
  return {
    ...op,
    execute: async (tx) => {
      const executed = await execute(tx);
      trace.business = executed.absorbedBy;
      return executed;
    },
  };
}

/** Phases 2–4, by the claim the operation declares. */
function claimed<T, Tx>(call: Call<T, Tx>): Promise<IdempotentResult<T>> {
  return claimOf(call.op) === "lease" ? claimWithLease(call) : claimInTransaction(call);
}

/** Outside work must come before the business transaction, so it needs the lease; work all in the database takes one commit. */
export function claimOf(op: Pick<IdempotentOperation<unknown, unknown>, "claim" | "prepare">): ClaimKind {
  if (op.claim === "transaction" && op.prepare)
    throw new Error("an operation with outside work (prepare) holds its key with a lease");
  return op.claim ?? (op.prepare ? "lease" : "transaction");
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
