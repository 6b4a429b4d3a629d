import { hostname } from "node:os";
import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";

/**
 * Liveness of the event workers (src/server/fulfilment/worker.ts): each process beats for its workers, and
 * jobs locked by a worker that stopped beating, or by none that runs them, go back to the queue.
 */

/** This process, as its workers' heartbeats name it. */
export const PROCESS = `${hostname()}:${process.pid}`;

/**
 * Proves this process's workers alive, then hands back to the queue every job
 * still locked by a worker that stopped beating — a process that was killed
 * (graphile-worker unlocks a crashed worker's jobs only after four hours). Its
 * consumers then run again elsewhere and find their consume records: at least
 * once, effects exactly once.
 */
export async function beatAndReclaim(db: Db, workerIds: string[], deadAfterMs: number): Promise<string[]> {
  if (workerIds.length > 0) {
    await db.execute(sql`
      INSERT INTO worker_heartbeat (worker_id, process, beat_at)
      SELECT id, ${PROCESS}, now() FROM unnest(${sql.param(workerIds)}::text[]) AS id
      ON CONFLICT (worker_id) DO UPDATE SET beat_at = now()`);
  }
  const dead = await db.execute<{ locked_by: string }>(sql`
    SELECT DISTINCT j.locked_by FROM graphile_worker._private_jobs j
     WHERE j.locked_by IS NOT NULL
       AND j.locked_at < now() - ${deadAfterMs} * interval '1 millisecond'
       AND NOT EXISTS (SELECT 1 FROM worker_heartbeat h
                        WHERE h.worker_id = j.locked_by
                          AND h.beat_at > now() - ${deadAfterMs} * interval '1 millisecond')`);
  const ids = dead.map((row) => row.locked_by);
  if (ids.length > 0) {
    await db.execute(sql`SELECT graphile_worker.force_unlock_workers(${sql.param(ids)}::text[])`);
  }
  // Workers that are gone (stopped, crashed, reclaimed) leave rows behind; keep the table small.
  await db.execute(sql`DELETE FROM worker_heartbeat WHERE beat_at < now() - interval '1 hour'`);
  return ids;
}

/**
 * Jobs locked by one of this process's live pools for longer than `olderThanMs` that no worker here
 * is running: their outcome was never written (the connection dropped under it). Unlocked, they run
 * again; their consumers find their consume records, so the effect still happens once.
 */
export async function unlockOrphans(
  db: Db,
  poolIds: string[],
  runningJobIds: string[],
  olderThanMs: number,
): Promise<string[]> {
  if (poolIds.length === 0) return [];
  const rows = await db.execute<{ id: string }>(sql`
    UPDATE graphile_worker._private_jobs SET locked_by = NULL, locked_at = NULL
     WHERE locked_by = ANY(${sql.param(poolIds)}::text[])
       AND locked_at < now() - ${olderThanMs} * interval '1 millisecond'
       AND NOT (id::text = ANY(${sql.param(runningJobIds)}::text[]))
    RETURNING id::text`);
  return rows.map((row) => row.id);
}
