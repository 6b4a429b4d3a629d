import { claimInBatch } from "./claim-in-batch";
import { claimInTransaction } from "./claim-in-transaction";
import { claimWithLease } from "./claim-with-lease";
import type { Answered, Call, ClaimKind, IdempotentOperation } from "./types";

/**
 * Phases 2–4, on one of three paths, chosen here and nowhere else:
 *   lease  - the operation has outside work (./claim-with-lease.ts)
 *   batch  - a batchable operation's call while others are in flight beside it (./claim-in-batch.ts)
 *   alone  - any other call: one transaction of its own (./claim-in-transaction.ts)
 */
export async function claimed<T, Tx>(call: Call<T, Tx>): Promise<Answered<T>> {
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

/** Outside work must come before the business transaction, so it needs the lease; work all in the database takes one commit. */
export function claimOf(op: Pick<IdempotentOperation<unknown, unknown>, "claim" | "prepare">): ClaimKind {
  if (op.claim === "transaction" && op.prepare)
    throw new Error("an operation with outside work (prepare) holds its key with a lease");
  return op.claim ?? (op.prepare ? "lease" : "transaction");
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
