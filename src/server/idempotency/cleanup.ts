import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";

export interface CleanupOptions {
  batchSize?: number;
  /** Upper bound per run, so one run never holds the database for long. */
  maxBatches?: number;
}

/**
 * Deletes expired idempotency records in small batches. A record whose holder
 * still has a live lease is kept until the lease runs out. SKIP LOCKED lets
 * several instances run this at once without waiting on each other.
 */
export async function deleteExpiredRecords(db: Db, options: CleanupOptions = {}): Promise<number> {
  const batchSize = options.batchSize ?? 500;
  const maxBatches = options.maxBatches ?? 100;
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const rows = await db.execute(sql`
      DELETE FROM idempotency_record
       WHERE (user_id, id) IN (SELECT user_id, id FROM idempotency_record
                     WHERE expires_at <= now()
                       AND (status <> 'PROCESSING' OR coalesce(locked_until <= now(), true))
                     ORDER BY expires_at
                     LIMIT ${batchSize}
                     FOR UPDATE SKIP LOCKED)
      RETURNING id`);
    deleted += rows.length;
    if (rows.length < batchSize) break;
  }
  return deleted;
}
