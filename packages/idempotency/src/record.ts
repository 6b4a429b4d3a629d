import type postgres from "postgres";
import { guard } from "./errors";
import { from, RECORD } from "./machine";
import type { IdempotencyConfig, KeyRef, Lease, RecordStore, StoredRefusal } from "./types";
import { versionOf } from "./types";

/**
 * The record table's statements, and nothing else: every read and every conditional write of a key. What a
 * record found means is decided in ./existing-record.ts, and answers are made in ./outcome.ts. The table is the
 * store's (./schema.ts makes one); every status written comes from the record's machine (./machine.ts).
 *
 * Answers go in as text cast to json (`::text::json`): postgres.js serialises a parameter the server types
 * as json with JSON.stringify, so the text of an answer would be stored as a JSON string, unless the client
 * is told otherwise (drizzle tells it so; a plain postgres.js pool, as examples/plain-node uses, does not).
 */

export interface RecordRow {
  user_id: string;
  id: string | number;
  fingerprint: string;
  status: "PROCESSING" | "SUCCESS" | "FAILED";
  response_body: unknown;
  answer_version: number;
  biz_id: string | null;
  lease_version: number;
  expires_at: string | Date;
  /** When the outcome was stored, in seconds (the holder's clock_timestamp() in the one-transaction path). */
  finished: number;
  remaining_ms: number;
  lease_live: boolean;
  expired: boolean;
  /** performance.now() before the read was sent (set here, not by the database). */
  askedAt?: number;
}

interface LeaseRow {
  user_id: string;
  record_id: string | number;
  lease_version: number;
  expires_at: string | Date;
  remaining_ms: number;
}

/** The store's names as identifiers, and the fragments of its statements, made once per store. */
const identifiers = new WeakMap<
  RecordStore<unknown>,
  {
    table: postgres.Helper<string>;
    fn: postgres.Helper<string>;
    /** Fragments of the one-transaction claim's RETURNING (claimInTransactionStatement). */
    lockTimeoutBack: postgres.PendingQuery<postgres.Row[]>;
    nothing: postgres.PendingQuery<postgres.Row[]>;
  }
>();
function named(store: RecordStore<unknown>) {
  let names = identifiers.get(store);
  if (!names) {
    names = {
      table: store.sql(store.table),
      fn: store.sql(store.storeOutcome),
      lockTimeoutBack: store.sql`, set_config('lock_timeout', NULL, true) AS lock_timeout`,
      nothing: store.sql``,
    };
    identifiers.set(store, names);
  }
  return names;
}

const LEASE_COLUMNS = (sql: postgres.Sql) =>
  sql`user_id, id AS record_id, lease_version, expires_at,
      greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms`;

/** The lease-with-fencing claim: committed on its own; a key already there is no error, just no row. */
export function claimStatement(
  store: RecordStore<unknown>,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
) {
  const { sql } = store;
  return sql<LeaseRow[]>`
    INSERT INTO ${named(store).table}
           (user_id, biz_type, idempotency_key, fingerprint, status, answer_version, locked_until, expires_at)
    VALUES (${ref.scope}, ${ref.bizType}, ${ref.key}, ${requestFingerprint}, ${RECORD.claim.to}, ${versionOf(ref)},
            now() + ${config.leaseMs} * interval '1 millisecond',
            now() + ${config.ttlMs} * interval '1 millisecond')
    ON CONFLICT (user_id, biz_type, idempotency_key) DO NOTHING
    RETURNING ${LEASE_COLUMNS(sql)}`;
}

/**
 * The one-transaction claim: a plain INSERT. A key that is there already is an error (unique_violation),
 * which aborts the transaction, so the business statements sent behind it do nothing; a key another
 * transaction is inserting at the same moment makes this one wait for that transaction's end (bounded by
 * lock_timeout), then either fail (it committed) or succeed (it rolled back).
 *
 * `lockTimeoutBack`: the claim's RETURNING puts the transaction's lock_timeout back to its default (the
 * server's, database's or role's setting, or the connection's start-up option: `set_config` with a NULL value is
 * `SET LOCAL … TO DEFAULT`). RETURNING is computed once the row and its index entries are in, after any wait for
 * the key: the claim is bounded, the business statements behind it are not. That holds because every wait of
 * the claim is in its index entries: the key's unique index is not deferrable, and the table has no trigger and
 * no foreign key that would check at the statement's end (./schema.ts makes it so).
 */
export function claimInTransactionStatement(
  store: RecordStore<unknown>,
  sql: postgres.Sql,
  ref: KeyRef,
  requestFingerprint: string,
  config: IdempotencyConfig,
  { lockTimeoutBack }: { lockTimeoutBack: boolean },
) {
  // No lease (locked_until NULL): the transaction holds the key, and nobody sees the claim before its outcome.
  const { table, lockTimeoutBack: back, nothing } = named(store);
  return sql<{ record_id: string | number; expires_at: string | Date }[]>`
    INSERT INTO ${table}
           (user_id, biz_type, idempotency_key, fingerprint, status, answer_version, expires_at)
    VALUES (${ref.scope}, ${ref.bizType}, ${ref.key}, ${requestFingerprint}, ${RECORD.claim.to}, ${versionOf(ref)},
            now() + ${config.ttlMs} * interval '1 millisecond')
    RETURNING id AS record_id, expires_at${lockTimeoutBack ? back : nothing}`;
}

/**
 * The one-transaction holder's outcome: an UPDATE of the row its own claim inserted, sent with COMMIT. It
 * changes no indexed column, so it is a HOT update (test/stuck-records-index.test.ts).
 *
 * It names the row by both of the table's unique keys, (user_id, id) and (user_id, biz_type, idempotency_key),
 * so whichever index the plan uses finds the row by all its columns. By the first alone, a generic plan made
 * while the table's statistics are unknown (a new table, not yet analyzed) can take the other index, which
 * leads with user_id too, and read every record of the scope to find one (test/idempotency-plans.test.ts).
 */
export function storeInTransactionStatement(
  store: RecordStore<unknown>,
  sql: postgres.Sql,
  ref: KeyRef,
  recordId: string | number,
  body: string,
  bizId: string | null,
) {
  return sql`
    UPDATE ${named(store).table}
       SET status = ${RECORD.succeed.to}, response_body = ${body}::text::json, biz_id = ${bizId},
           updated_at = clock_timestamp()
     WHERE user_id = ${ref.scope} AND id = ${recordId}
       AND biz_type = ${ref.bizType} AND idempotency_key = ${ref.key}`;
}

/**
 * A lease holder's outcome, conditional on its lease version: the store function raises XO001 when the
 * key was taken over, which aborts the transaction, so its COMMIT (sent with it) is a ROLLBACK.
 */
export function storeFencedStatement(
  store: RecordStore<unknown>,
  sql: postgres.Sql,
  lease: Lease,
  body: string,
  bizId: string | null,
) {
  return sql`SELECT ${named(store).fn}(${lease.scope}, ${lease.recordId}, ${lease.leaseVersion},
                                        ${RECORD.succeed.to}, ${body}::text::json, ${bizId})`;
}

/** Raised by the store function (./schema.ts) when the lease was taken over. */
export const LEASE_LOST_SQLSTATE = "XO001";

export function recordStatement(store: RecordStore<unknown>, sql: postgres.Sql, ref: KeyRef) {
  return sql<RecordRow[]>`
    SELECT user_id, id, fingerprint, status, response_body, answer_version, biz_id, lease_version, expires_at,
           extract(epoch FROM updated_at)::float8 AS finished,
           greatest(0, extract(epoch FROM expires_at - now()) * 1000)::float8 AS remaining_ms,
           coalesce(locked_until > now(), false) AS lease_live, expires_at <= now() AS expired
      FROM ${named(store).table}
     WHERE user_id = ${ref.scope} AND biz_type = ${ref.bizType} AND idempotency_key = ${ref.key}`;
}

/** Reads the record, noting when it was asked (for the replay cache's clock). */
export async function readRecord(store: RecordStore<unknown>, ref: KeyRef): Promise<RecordRow | undefined> {
  const askedAt = performance.now();
  const [row] = await guard(() => recordStatement(store, store.sql, ref));
  return row ? { ...row, askedAt } : undefined;
}

/** A refusal stored in one step (no claim is left: the one-transaction attempt rolled back); no row if another copy's outcome is there. */
export async function insertRefusal(
  store: RecordStore<unknown>,
  ref: KeyRef,
  requestFingerprint: string,
  body: StoredRefusal,
  config: IdempotencyConfig,
): Promise<Lease | undefined> {
  const askedAt = performance.now();
  const { sql } = store;
  const [stored] = await guard(
    () => sql<LeaseRow[]>`
      INSERT INTO ${named(store).table}
             (user_id, biz_type, idempotency_key, fingerprint, status, response_body, answer_version, expires_at)
      VALUES (${ref.scope}, ${ref.bizType}, ${ref.key}, ${requestFingerprint}, ${RECORD.refuse.to},
              ${JSON.stringify(body)}::text::json, ${versionOf(ref)}, now() + ${config.ttlMs} * interval '1 millisecond')
      ON CONFLICT (user_id, biz_type, idempotency_key) DO NOTHING
      RETURNING ${LEASE_COLUMNS(sql)}`,
  );
  return toLease(stored, askedAt);
}

/** A lease holder's refusal, fenced: false when another request took the key over (it stores its own). */
export async function storeFailure(
  store: RecordStore<unknown>,
  lease: Lease,
  body: StoredRefusal,
): Promise<boolean> {
  const rows = await guard(
    () => store.sql`
      UPDATE ${named(store).table}
         SET status = ${RECORD.fail.to}, response_body = ${JSON.stringify(body)}::text::json, locked_until = NULL,
             updated_at = now()
       WHERE user_id = ${lease.scope} AND id = ${lease.recordId} AND lease_version = ${lease.leaseVersion}
         AND status = ${from(RECORD.fail)}
      RETURNING id`,
  );
  return rows.length > 0;
}

/**
 * Frees the key (`release`), fenced by the lease. Best effort: if the database is gone, the lease runs out and
 * the key is taken over instead.
 */
export async function release(store: RecordStore<unknown>, lease: Lease): Promise<void> {
  try {
    await store.sql`
      DELETE FROM ${named(store).table}
       WHERE user_id = ${lease.scope} AND id = ${lease.recordId} AND lease_version = ${lease.leaseVersion}
         AND status = ${from(RECORD.release)}`;
  } catch {
    // The original error is the one worth reporting.
  }
}

/** A record by its key (user_id, id), and the answer version the new holder's code stores. */
export interface RecordKey {
  scope: string;
  recordId: number;
  answerVersion: number;
}

/**
 * The key again, under the next lease version, by one conditional UPDATE of the record seen (SKIP LOCKED: a
 * holder still inside its transaction keeps the row; it is polled instead):
 *   lapsed  - its holder's lease ran out: take the key over as it is (`renewLease`)
 *   expired - the key expired: claim it afresh for this request, whatever it held (`takeOver`)
 */
export async function nextLease(
  store: RecordStore<unknown>,
  { scope, recordId, answerVersion }: RecordKey,
  seenVersion: number,
  config: IdempotencyConfig,
  expiredFor?: { fingerprint: string },
): Promise<Lease | undefined> {
  const askedAt = performance.now();
  const { sql } = store;
  const { table } = named(store);
  const lease = sql`now() + ${config.leaseMs} * interval '1 millisecond'`;
  const set = expiredFor
    ? sql`status = ${RECORD.takeOver.to}, fingerprint = ${expiredFor.fingerprint}, response_body = NULL,
          biz_id = NULL, created_at = now(), expires_at = now() + ${config.ttlMs} * interval '1 millisecond'`
    : sql`status = ${RECORD.renewLease.to}`;
  const when = expiredFor
    ? sql`expires_at <= now()`
    : sql`status = ${from(RECORD.renewLease)} AND locked_until <= now()`;
  const rows = await guard(
    () => sql<LeaseRow[]>`
      UPDATE ${table}
         SET ${set}, lease_version = lease_version + 1, locked_until = ${lease}, updated_at = now(),
             answer_version = ${answerVersion}
       WHERE user_id = ${scope}
         AND id = (SELECT id FROM ${table}
                    WHERE user_id = ${scope} AND id = ${recordId} AND lease_version = ${seenVersion} AND ${when}
                    FOR UPDATE SKIP LOCKED)
      RETURNING ${LEASE_COLUMNS(sql)}`,
  );
  return toLease(rows[0], askedAt);
}

export function toLease(row: LeaseRow | undefined, askedAt: number): Lease | undefined {
  return row
    ? {
        scope: row.user_id,
        recordId: Number(row.record_id),
        leaseVersion: row.lease_version,
        expiresAt: new Date(row.expires_at),
        remainingMs: Number(row.remaining_ms),
        askedAt,
      }
    : undefined;
}
