import * as core from "@exactly-once/idempotency";
import { type Db, holdConnection, type Tx } from "~/server/db/client";
import { DomainError, type DomainErrorCode, isDomainError } from "~/server/errors";

/**
 * The core (packages/idempotency/src) mounted on this app: its records in `idempotency_record` (drizzle/), business
 * writes on a drizzle transaction, refusals as DomainError. The one place the core's errors become the app's.
 */

export type IdempotentOperation<T> = Omit<core.IdempotentOperation<T, Tx>, "refusal"> & {
  /**
   * Deterministic business rejections: stored and replayed like a success. Every
   * other failure releases the key so the same key can run again.
   */
  storedErrors: readonly DomainErrorCode[];
};

const stores = new WeakMap<Db, core.RecordStore<Tx>>();

/** The app's record store: its pool, a held connection with a drizzle transaction bound to it, its table. */
export function recordStore(db: Db): core.RecordStore<Tx> {
  let store = stores.get(db);
  if (!store) {
    store = {
      sql: db.$client,
      hold: () => holdConnection(db),
      table: "idempotency_record",
      storeOutcome: "idempotency_store_outcome",
    };
    stores.set(db, store);
  }
  return store;
}

export async function runIdempotent<T>(
  db: Db,
  op: IdempotentOperation<T>,
  config: core.IdempotencyConfig = core.DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<core.IdempotentResult<T>> {
  try {
    return await core.runIdempotent(recordStore(db), declared(op), config);
  } catch (error) {
    throw asDomainError(error);
  }
}

/** One request as its transport holds it, through the core's one entry (core.serveIdempotent): the known replay, the run, the rendering. */
export async function serveIdempotent<T, R>(
  db: Db,
  request: Omit<core.IdempotentRequest<T, Tx, R>, "operation"> & {
    operation: () => Promise<IdempotentOperation<T>>;
  },
  config: core.IdempotencyConfig = core.DEFAULT_IDEMPOTENCY_CONFIG,
): Promise<core.Served<R>> {
  try {
    return await core.serveIdempotent(
      recordStore(db),
      { ...request, operation: async () => declared(await request.operation()) },
      config,
    );
  } catch (error) {
    throw asDomainError(error);
  }
}

/** How many batches of first executions ran on this pool, and how many calls they took (tests, the bench). */
export function batchStatsOf(db: Db): core.BatchStats {
  return core.batchStats(recordStore(db) as core.RecordStore<unknown>);
}

/** Claims a key with a lease outside any operation (tests: a holder that stops, a key held by another scope). */
export async function acquire(
  db: Db,
  ref: core.KeyRef,
  requestFingerprint: string,
  config: core.IdempotencyConfig,
): Promise<core.Acquired> {
  try {
    return await core.acquire(recordStore(db), ref, requestFingerprint, config);
  } catch (error) {
    throw asDomainError(error);
  }
}

/** Runs an operation under a lease claimed earlier (tests: a stale holder fenced by a take-over). */
export async function executeUnderLease<T>(
  db: Db,
  lease: core.Lease,
  op: IdempotentOperation<T>,
): Promise<core.IdempotentResult<T>> {
  const call: core.Call<T, Tx> = {
    store: recordStore(db),
    op: declared(op),
    requestFingerprint: core.fingerprint(op.bizType, op.request),
    config: core.DEFAULT_IDEMPOTENCY_CONFIG,
    trace: { waited: false },
  };
  try {
    return (await core.executeUnderLease(call, lease)).result;
  } catch (error) {
    throw asDomainError(error);
  }
}

function declared<T>({ storedErrors, ...op }: IdempotentOperation<T>): core.IdempotentOperation<T, Tx> {
  return {
    ...op,
    refusal: (error) =>
      isDomainError(error) && storedErrors.includes(error.code)
        ? { code: error.code, message: error.message, meta: error.details.meta }
        : undefined,
  };
}

/** The core's refusals (its own, and the declared ones it stored or replays) as the app's DomainError. */
function asDomainError(error: unknown): unknown {
  return error instanceof core.IdempotencyError
    ? new DomainError(error.code as DomainErrorCode, error.message, error.details, { cause: error.cause })
    : error;
}
