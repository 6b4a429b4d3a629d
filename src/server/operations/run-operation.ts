import {
  DEFAULT_IDEMPOTENCY_CONFIG,
  type IdempotencyConfig,
  type IdempotentResult,
} from "@exactly-once/idempotency";
import type { z } from "zod";
import type { Db } from "~/server/db/client";
import { unavailableIfTransient } from "~/server/errors";
import {
  type AnyOperation,
  type Executed,
  gatewayKeyOf,
  keyOfCall,
  type Operation,
  type OperationContext,
} from "./define";
import { recordOperation } from "./record-operation";
import { runIdempotent, serveIdempotent } from "./record-store";

export interface OperationCall<I, D> {
  userId: string;
  input: I;
  deps: D;
  /** A key from outside the input (REST's Idempotency-Key); a client-key operation reads its own field. */
  key?: string;
}

export type OperationAnswer<R> = R & {
  /** This answer was given before: by the idempotency record, or by the business key. */
  replayed: boolean;
  /** When the key is forgotten (only when a record was used). */
  keyExpiresAt?: Date;
};

/**
 * Runs an operation once per key: through the idempotency record when there is a key,
 * else (a natural-key operation called without one) in one transaction whose unique
 * index decides.
 */
export async function runOperation<S extends z.ZodType, R, D, I = z.output<S>>(
  db: Db,
  op: Operation<S, R, D, I>,
  call: OperationCall<I, D>,
  config: IdempotencyConfig = DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<OperationAnswer<R>> {
  const ctx: OperationContext<D> = { userId: call.userId, deps: call.deps };
  const key = keyOfCall(op as unknown as Operation<z.ZodType, unknown, never, I>, call);
  let answer: OperationAnswer<R>;
  if (key === undefined) {
    const started = Date.now();
    if (op.prepare) await op.prepare(db, call.input, ctx);
    const executed = await transient(() => db.transaction((tx) => op.execute(tx, call.input, ctx)));
    answer = { ...executed.result, replayed: executed.existed ?? false };
    // No record, but the same observer: the unique index answered (an existing row) or this call made it.
    if (op.key.kind === "natural") {
      config.observe?.({
        bizType: op.name,
        key: op.key.of(call.input),
        scope: call.userId,
        outcome: executed.existed ? "replayed" : "first",
        durationMs: Date.now() - started,
        ...(executed.existed ? { absorbedBy: op.key.absorbedBy } : {}),
      });
    }
  } else {
    answer = answerOf(await runIdempotent(db, recordOperation(db, op, call.input, ctx, key), config));
  }
  if (op.afterCommit) await op.afterCommit(db, stripAnswer(answer), ctx).catch(() => undefined);
  return answer;
}

/** One request of an operation as a transport hands it over (`serveOperation`). */
export interface ServedRequest<I, R, D, Rendering> {
  userId: string;
  deps: D;
  /** The key from outside the input (REST's Idempotency-Key); absent: the operation reads its own from the input. */
  key?: string;
  /** The key the raw input carries, for the known replay alone (tRPC, before the input is read). */
  replayKey?: string;
  config: IdempotencyConfig;
  /** All that decides the input besides the shopper and the key, as sent; absent: no known replay, none kept. */
  requestText?: string;
  /** The transport's admission of the call, by the key the gateway counts duplicates by. */
  admit: (gatewayKey: string | undefined) => Promise<void>;
  /** The input, read and validated; called only when no known replay answered. */
  read: () => Promise<I>;
  /** The answer as the transport renders it, and its size in characters (what the replay cache counts). */
  render: (answer: OperationAnswer<R>, input: I) => { rendering: Rendering; chars: number };
}

/**
 * One request of an operation, from the transport's text to its rendering, in one call. With a key known before
 * the input is read (REST's header, the key a tRPC input carries), one call into the core
 * (`serveIdempotent`): a known replay (this text answered before: no parsing, validation or hashing), else the
 * input read, admitted, run once per key, rendered, and (a replay) kept for the next known replay. Without
 * one, the input read, admitted and run (`runOperation`).
 */
export async function serveOperation<S extends z.ZodType, R, D, Rendering>(
  db: Db,
  op: Operation<S, R, D>,
  request: ServedRequest<z.output<S>, R, D, Rendering>,
): Promise<{ rendering: Rendering; replayed: boolean }> {
  const { userId, key, deps, config, requestText } = request;
  const knownKey = key ?? request.replayKey;
  if (knownKey === undefined) {
    const input = await request.read();
    await request.admit(gatewayKeyOf(op as AnyOperation, { input, key }));
    const answer = await runOperation(db, op, { userId, input, deps }, config);
    return { rendering: request.render(answer, input).rendering, replayed: answer.replayed };
  }
  const ctx: OperationContext<D> = { userId, deps };
  let input: z.output<S> | undefined;
  let answer: OperationAnswer<R> | undefined;
  try {
    return await serveIdempotent(
      db,
      {
        scope: userId,
        bizType: op.name,
        key: knownKey,
        ...(requestText !== undefined ? { text: requestText } : {}),
        admit: () => request.admit(knownKey),
        operation: async () => {
          const read = await request.read();
          input = read;
          await request.admit(gatewayKeyOf(op as AnyOperation, { input: read, key }));
          const recordKey = keyOfCall(op as AnyOperation, { input: read, key }) ?? knownKey;
          return recordOperation(db, op, read, ctx, recordKey);
        },
        render: (outcome: IdempotentResult<Executed<R>>) => {
          answer = answerOf(outcome);
          const { rendering, chars } = request.render(answer, input as z.output<S>);
          return { rendering, chars, replayed: answer.replayed };
        },
      },
      config,
    );
  } finally {
    // After every run that answered (its rendering too may fail), as runOperation does; a known replay ran nothing.
    if (answer && op.afterCommit) await op.afterCommit(db, stripAnswer(answer), ctx).catch(() => undefined);
  }
}

/** The answer of a run under a record: its result, a replay of the record or of the business object its key found. */
function answerOf<R>(outcome: IdempotentResult<Executed<R>>): OperationAnswer<R> {
  const { result, existed } = outcome.result;
  return { ...result, replayed: outcome.replayed || (existed ?? false), keyExpiresAt: outcome.keyExpiresAt };
}

function stripAnswer<R>(answer: OperationAnswer<R>): R {
  const { replayed: _replayed, keyExpiresAt: _expires, ...result } = answer;
  return result as R;
}

/** A database that went away while there was no record to release is a retryable 503 too. */
async function transient<R>(work: () => Promise<R>): Promise<R> {
  try {
    return await work();
  } catch (error) {
    throw unavailableIfTransient(error);
  }
}
