import { claimInBatch } from "./claim-in-batch";
import { claimInTransaction } from "./claim-in-transaction";
import { claimWithLease } from "./claim-with-lease";
import { IdempotencyError } from "./errors";
import { ABSORBERS, type IdempotencyOutcome } from "./events";
import { fingerprint } from "./fingerprint";
import { throughCache } from "./look-up";
import {
  type Answered,
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
 *   2 claim     the key, on the path chosen here once (`claimed`): with a lease, alone in a transaction, or in a
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
    const call: Call<T, Tx> = { store, op: noting(op, trace), requestFingerprint, config, trace };
    const result = config.cache
      ? await throughCache(config.cache, call, claimed)
      : (await claimed(call)).result;
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

/**
 * Phases 2–4, on one of three paths, chosen here and nowhere else:
 *   lease  - the operation has outside work (./claim-with-lease.ts)
 *   batch  - a batchable operation's call while others are in flight beside it (./claim-in-batch.ts)
 *   alone  - any other call: one transaction of its own (./claim-in-transaction.ts)
 */
async function claimed<T, Tx>(call: Call<T, Tx>): Promise<Answered<T>> {
  if (claimOf(call.op) === "lease") return claimWithLease(call);
  const batch = call.config.batch;
  if (!batch || !call.op.batchable) return claimInTransaction(call);
  const flight = inFlightOn(call.store);
  flight.calls++;
  try {
    return await (flight.calls > 1 ? claimInBatch(call, batch) : claimInTransaction(call));
  } finally {
    flight.calls--;
  }
}

/** Calls of batchable operations in flight, per store: a call that comes while one is in flight joins a batch. */
const inFlight = new WeakMap<object, { calls: number }>();
function inFlightOn(store: object): { calls: number } {
  let flight = inFlight.get(store);
  if (!flight) {
    flight = { calls: 0 };
    inFlight.set(store, flight);
  }
  return flight;
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
