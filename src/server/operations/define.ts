import type { ClaimKind } from "@exactly-once/idempotency";
import type { z } from "zod";
import type { Db, Tx } from "~/server/db/client";
import type { DomainErrorCode } from "~/server/errors";

/**
 * One idempotent operation, defined once in its capability folder. The tRPC procedure and the REST route
 * each mount it in one line (`src/server/trpc/mutation.ts`, `src/server/rest/rest-route.ts`); the OpenAPI
 * document is made from the same objects. The definition says how REST exposes it (`rest`); running it
 * (./run-operation.ts) knows nothing of HTTP.
 */
export interface Operation<S extends z.ZodType, R, D = unknown, I = z.output<S>> {
  /** `capability.verb`: the record's biz type, the gateway's route, the log and metric label. */
  name: string;
  /** The whole input (what tRPC takes; REST assembles it from path, body and Idempotency-Key). */
  input: S;
  key: OperationKey<I>;
  /** Deterministic business refusals: stored under the key and replayed like a success. */
  storedErrors: readonly DomainErrorCode[];
  /** The gateway in front of it: per shopper and operation, and per key (duplicate bursts). */
  gateway: "per-shopper-and-key" | "off";
  /** The canonical request: what "the same request" means for the fingerprint. Defaults to the input less the client key. */
  canonical?: (input: I) => unknown;
  /**
   * Work outside this database that must happen before the business transaction (asking the
   * provider to close a trade). It runs once the key is held, outside any transaction, and must
   * be idempotent by its own key: a retry after a crash runs it again.
   */
  prepare?: (db: Db, input: I, ctx: OperationContext<D>) => Promise<void>;
  /** How its key is held (packages/idempotency/src/claim.ts, claimOf): default `lease` with `prepare`, else `transaction`. */
  claim?: ClaimKind;
  /**
   * This call may share its transaction with other first executions (packages/idempotency/src/claim-in-batch.ts): its
   * statements lock no row another call could lock, and wait on no key but its own.
   */
  batchable?: (input: I) => boolean;
  /** The business writes, in the transaction that also stores the answer. */
  execute: (tx: Tx, input: I, ctx: OperationContext<D>) => Promise<Executed<R>>;
  /** Work after the commit (telling the provider); best effort, idempotent; never changes the answer. */
  afterCommit?: (db: Db, result: R, ctx: OperationContext<D>) => Promise<void>;
  /** How REST exposes it; absent: tRPC only. */
  rest?: RestBinding<I, R>;
  /**
   * The shape of its answer: bump `version` when a deploy changes it, and say how to read an answer stored
   * in an older shape (`upgrade`), or it is replayed as stored. Absent: version 1.
   */
  answer?: { version: number; upgrade?: (stored: unknown, storedVersion: number) => R };
}

export type OperationKey<I> =
  /** The client makes a key per intent and sends it in `field`; over REST the Idempotency-Key header fills it. */
  | {
      kind: "client";
      field: keyof I & string;
      fromHeader?: (userId: string, headerKey: string) => string;
      /**
       * What answers a call whose business object is there already though its key is new (sent again after the
       * key expired): the business key's unique index. The story shows it.
       */
      absorbedBy: string;
    }
  /**
   * The business key is in the input (`describe` says which) and a unique index decides: over tRPC
   * there is no record, and execute answers the existing object; over REST the Idempotency-Key adds one.
   */
  | {
      kind: "natural";
      describe: string;
      of: (input: I) => string;
      /** What answers a copy when the object exists already (a unique index by name, a conditional update's FROM state): the story shows it. */
      absorbedBy: string;
    };

export interface OperationContext<D> {
  userId: string;
  deps: D;
}

export interface Executed<R> {
  result: R;
  /** The business object made (or found), kept on the record for operators. */
  bizId?: string | null;
  /** The business key found its object already there: the answer is a replay of the business, not of the record. */
  existed?: boolean;
}

export interface RestBinding<I, R> {
  method: "POST";
  /** OpenAPI-style path, e.g. `/api/v1/orders/{orderId}/refunds`. */
  path: string;
  summary: string;
  /** Path parameters; one that does not parse is a 404 with this code. */
  params?: z.ZodObject;
  notFound?: DomainErrorCode;
  /** The JSON body (documented and validated before the input is assembled). */
  body?: z.ZodObject;
  status: 200 | 201;
  /** The answer body: parsing the result through it fixes the key order, so a replay is byte for byte. */
  resource: z.ZodType;
  location?: (result: R, input: I) => string;
}

export function defineOperation<S extends z.ZodType, R, D = unknown>(
  op: Operation<S, R, D>,
): Operation<S, R, D> {
  return op;
}

/** The idempotency key of a call: the one given, the client's field, or none (natural key alone). */
// biome-ignore lint/suspicious/noExplicitAny: any operation, whatever its schema, answer and dependencies
export type AnyOperation = Operation<any, any, any>;

export function keyOfCall<I>(op: Operation<z.ZodType, unknown, never, I>, call: { input: I; key?: string }) {
  if (call.key !== undefined) return call.key;
  return op.key.kind === "client" ? String(call.input[op.key.field]) : undefined;
}

/** The key the gateway counts duplicates by: the idempotency key, else the natural key. */
export function gatewayKeyOf<I>(
  op: Operation<z.ZodType, unknown, never, I>,
  call: { input: I; key?: string },
) {
  return keyOfCall(op, call) ?? (op.key.kind === "natural" ? op.key.of(call.input) : undefined);
}

/**
 * The key a raw, not yet validated input carries: the record's (`record`) or the one the gateway counts
 * duplicates by (`gateway`); none when the input cannot be read so.
 */
export function keyOfRawInput(
  op: AnyOperation,
  input: unknown,
  which: "record" | "gateway",
): string | undefined {
  if (typeof input !== "object" || input === null) return undefined;
  try {
    const call = { input: input as Record<string, unknown> };
    const key = which === "record" ? keyOfCall(op, call) : gatewayKeyOf(op, call);
    return typeof key === "string" ? key : undefined;
  } catch {
    return undefined;
  }
}

/** The request the fingerprint hashes: the canonical form, or the input less the client key. */
export function canonicalRequest<I>(op: Operation<z.ZodType, unknown, never, I>, input: I): unknown {
  if (op.canonical) return op.canonical(input);
  if (op.key.kind !== "client") return input;
  const { [op.key.field]: _key, ...rest } = input as Record<string, unknown>;
  return rest;
}
