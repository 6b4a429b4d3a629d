import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { consumersOf } from "./consumers";

export const CONSUME_TASK = "consume-event";
/** After this many failed attempts a job stays in the queue as failed: the dead letters. */
export const MAX_ATTEMPTS = 8;

export interface ConsumeJob {
  eventId: string;
  /** The event's shopper, so the job reads it by its key (user_id, id); absent in jobs queued before it was. */
  userId?: string;
  consumer: string;
}

/**
 * Moves unpublished outbox events into the job queue, one job per consumer,
 * with a job key derived from the event id. The queue lives in the same
 * database, so enqueueing and marking the event published commit together;
 * several relays can run at once (SKIP LOCKED).
 */
export async function relayOutbox(db: Db, limit = 100): Promise<number> {
  return db.transaction(async (tx) => {
    const events = await tx.execute<{ id: string; user_id: string; event_type: string }>(sql`
      SELECT id, user_id, event_type FROM outbox_event
       WHERE published_at IS NULL
       ORDER BY created_at
       LIMIT ${limit}
       FOR UPDATE SKIP LOCKED`);
    if (events.length === 0) return 0;
    for (const event of events) {
      for (const consumer of consumersOf(event.event_type)) {
        const job: ConsumeJob = { eventId: event.id, userId: event.user_id, consumer: consumer.name };
        await tx.execute(sql`
          SELECT graphile_worker.add_job(
            ${CONSUME_TASK}, ${JSON.stringify(job)}::json,
            max_attempts := ${MAX_ATTEMPTS}, job_key := ${`${event.id}:${consumer.name}`})`);
      }
    }
    // By the table's key, (user_id, id).
    await tx.execute(sql`
      UPDATE outbox_event SET published_at = now()
       WHERE (user_id, id) IN (SELECT * FROM unnest(${sql.param(events.map((e) => e.user_id))}::text[],
                                                    ${sql.param(events.map((e) => e.id))}::uuid[]))`);
    return events.length;
  });
}
