import { RECORD } from "./machine";
import type { RecordStore } from "./types";

export interface DeleteExpiredOptions {
  /** Records deleted per statement. */
  batchSize?: number;
  /** Upper bound of statements per call, so one call never holds the database for long. */
  maxBatches?: number;
}

/**
 * Forgets expired keys (the record machine's `expire`): deletes the store's records whose `expires_at` has
 * passed, in small batches. A record
 * whose holder still has a live lease is kept until the lease runs out (its holder may yet store an outcome).
 * `FOR UPDATE SKIP LOCKED` lets several instances run it at once without waiting on each other. Returns how
 * many records it deleted. Run it every minute or so (the app's job: `IDEMPOTENCY_CLEANUP_INTERVAL_MS`).
 */
export async function deleteExpired(
  store: Pick<RecordStore<unknown>, "sql" | "table">,
  { batchSize = 500, maxBatches = 100 }: DeleteExpiredOptions = {},
): Promise<number> {
  const { sql } = store;
  const table = sql(store.table);
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const rows = await sql`
      DELETE FROM ${table}
       WHERE (user_id, id) IN (SELECT user_id, id FROM ${table}
                                WHERE expires_at <= now() AND status IN ${sql(RECORD.expire.from)}
                                  AND (status <> ${RECORD.claim.to} OR coalesce(locked_until <= now(), true))
                                ORDER BY expires_at
                                LIMIT ${batchSize}
                                FOR UPDATE SKIP LOCKED)
      RETURNING id`;
    deleted += rows.length;
    if (rows.length < batchSize) break;
  }
  return deleted;
}
