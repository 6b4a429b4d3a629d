import {
  DEFAULT_IDEMPOTENCY_CONFIG,
  type IdempotencyConfig,
  type KeyRef,
  keepRendering,
  knownReplay,
} from "@exactly-once/idempotency";
import type { z } from "zod";
import type { Db } from "~/server/db/client";
import { unavailableIfTransient } from "~/server/errors";
import {
  type AnyOperation,
  canonicalRequest,
  type Executed,
  gatewayKeyOf,
  keyOfCall,
  type Operation,
  type OperationContext,
} from "./define";
import { type IdempotentOperation, runIdempotent } from "./record-store";

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
    const upgrade = op.answer?.upgrade;
    const record: IdempotentOperation<Executed<R>> = {
      scope: call.userId,
      bizType: op.name,
      key,
      answerVersion: op.answer?.version ?? 1,
      // What the record stores is the whole execution ({ result, bizId, existed }): the answer is its result.
      ...(upgrade
        ? {
            upgradeAnswer: (stored: unknown, storedVersion: number) => {
              const executed = stored as Executed<unknown>;
              return { ...executed, result: upgrade(executed.result, storedVersion) } as Executed<R>;
            },
          }
        : {}),
      request: canonicalRequest(op as unknown as Operation<z.ZodType, unknown, never, I>, call.input),
      storedErrors: op.storedErrors,
      ...(op.claim ? { claim: op.claim } : {}),
      ...(op.batchable?.(call.input) ? { batchable: true } : {}),
      execute: async (tx) => {
        const executed = await op.execute(tx, call.input, ctx);
        return {
          result: executed,
          bizId: executed.bizId ?? null,
          ...(executed.existed ? { absorbedBy: op.key.absorbedBy } : {}),
        };
      },
    };
    const prepare = op.prepare;
    if (prepare) record.prepare = () => prepare(db, call.input, ctx);
    const outcome = await runIdempotent(db, record, config);
    const { result, existed } = outcome.result;
    answer = {
      ...result,
      replayed: outcome.replayed || (existed ?? false),
      keyExpiresAt: outcome.keyExpiresAt,
    };
    keyOfAnswer.set(answer, { scope: record.scope, bizType: op.name, key, request: record.request });
  }
  if (op.afterCommit) await op.afterCommit(db, stripAnswer(answer), ctx).catch(() => undefined);
  return answer;
}

/**
 * A known replay (docs/idempotency.md, "Known replays"): what a transport rendered for this very request
 * text under this shopper's key before, while this instance holds the key's success, once `admit` let the
 * copy in; undefined: run the call. The text must be all that decides the input besides the shopper and the
 * key (the transport's path and body).
 */
function knownAnswer<R>(
  config: IdempotencyConfig,
  op: AnyOperation,
  call: { userId: string; key: string; requestText: string; admit: () => Promise<void> },
): Promise<{ rendering: R; keyExpiresAt: Date } | undefined> {
  return knownReplay<R>(
    config,
    { scope: call.userId, bizType: op.name, key: call.key },
    call.requestText,
    call.admit,
  );
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
 * One request of an operation, from the transport's text to its rendering, in one call: a known replay (this
 * text answered before: no parsing, validation or hashing), else the input read, admitted, run once per key,
 * rendered, and (a replay) kept for the next known replay.
 */
export async function serveOperation<S extends z.ZodType, R, D, Rendering>(
  db: Db,
  op: Operation<S, R, D>,
  request: ServedRequest<z.output<S>, R, D, Rendering>,
): Promise<{ rendering: Rendering; replayed: boolean }> {
  const { userId, key, config, requestText } = request;
  const knownKey = key ?? request.replayKey;
  if (requestText !== undefined && knownKey !== undefined) {
    const known = await knownAnswer<Rendering>(config, op as AnyOperation, {
      userId,
      key: knownKey,
      requestText,
      admit: () => request.admit(knownKey),
    });
    if (known) return { rendering: known.rendering, replayed: true };
  }
  const input = await request.read();
  await request.admit(gatewayKeyOf(op as AnyOperation, { input, key }));
  const answer = await runOperation(
    db,
    op,
    { userId, input, deps: request.deps, ...(key !== undefined ? { key } : {}) },
    config,
  );
  const { rendering, chars } = request.render(answer, input);
  if (requestText !== undefined) keepAnswer(config, answer, requestText, rendering, chars);
  return { rendering, replayed: answer.replayed };
}

/** The key and canonical request an answer was run with under a record, for `keepAnswer`. */
const keyOfAnswer = new WeakMap<object, KeyRef & { request: unknown }>();

/**
 * Keeps a transport's rendering of a replayed success under its request text, for `knownAnswer`. `answer` is
 * what `runOperation` answered: one run under a record remembers its key and request, and is kept when it is a
 * replay (of the record, or of the business object its key found); anything else is not kept.
 */
function keepAnswer(
  config: IdempotencyConfig,
  answer: unknown,
  requestText: string,
  rendering: unknown,
  renderingChars: number,
): void {
  const ran = typeof answer === "object" && answer !== null ? keyOfAnswer.get(answer) : undefined;
  if (!ran || !(answer as OperationAnswer<unknown>).replayed) return;
  const { request, ...ref } = ran;
  keepRendering(config, ref, request, requestText, rendering, renderingChars);
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
