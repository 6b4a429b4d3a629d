import type { IdempotentOperation, Trace } from "./types";

/** The operation, its execution noting in the call's trace when its business object was there already. */
export function traced<T, Tx>(op: IdempotentOperation<T, Tx>, trace: Trace): IdempotentOperation<T, Tx> {
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
