import type { z } from "zod";
import type { Db } from "~/server/db/client";
import { canonicalRequest, type Executed, type Operation, type OperationContext } from "./define";
import type { IdempotentOperation } from "./record-store";

/**
 * A defined operation's call as the core runs it under its key: what the record stores is the whole execution
 * (`{ result, bizId, existed }`), its fingerprint is the canonical request, and an answer stored in an older
 * shape is read through the operation's `answer.upgrade`.
 */
export function recordOperation<S extends z.ZodType, R, D, I>(
  db: Db,
  op: Operation<S, R, D, I>,
  input: I,
  ctx: OperationContext<D>,
  key: string,
): IdempotentOperation<Executed<R>> {
  const upgrade = op.answer?.upgrade;
  const record: IdempotentOperation<Executed<R>> = {
    scope: ctx.userId,
    bizType: op.name,
    key,
    answerVersion: op.answer?.version ?? 1,
    ...(upgrade
      ? {
          upgradeAnswer: (stored: unknown, storedVersion: number) => {
            const executed = stored as Executed<unknown>;
            return { ...executed, result: upgrade(executed.result, storedVersion) } as Executed<R>;
          },
        }
      : {}),
    request: canonicalRequest(op as unknown as Operation<z.ZodType, unknown, never, I>, input),
    storedErrors: op.storedErrors,
    ...(op.claim ? { claim: op.claim } : {}),
    ...(op.batchable?.(input) ? { batchable: true } : {}),
    execute: async (tx) => {
      const executed = await op.execute(tx, input, ctx);
      return {
        result: executed,
        bizId: executed.bizId ?? null,
        ...(executed.existed ? { absorbedBy: op.key.absorbedBy } : {}),
      };
    },
  };
  const prepare = op.prepare;
  if (prepare) record.prepare = () => prepare(db, input, ctx);
  return record;
}
