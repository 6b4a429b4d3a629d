import { sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { refusedNotification, type VerificationRefusal } from "~/server/db/schema";

/**
 * Notifications refused before verification, counted in memory and written as
 * one row per minute and reason (`refused_notification`) when flushed. Anyone can
 * send such a notification, so it costs the database nothing on its own: a flood
 * of them is a few counters here and at most one row per minute and reason there.
 */
export class RefusalTally {
  private counts = new Map<VerificationRefusal, number>();

  add(reason: VerificationRefusal): void {
    this.counts.set(reason, (this.counts.get(reason) ?? 0) + 1);
  }

  /** Writes what was counted since the last flush (and prunes rows older than a day); returns what it wrote. */
  async flush(db: Db): Promise<Partial<Record<VerificationRefusal, number>>> {
    const taken = this.counts;
    this.counts = new Map();
    if (taken.size === 0) return {};
    try {
      await db
        .insert(refusedNotification)
        .values(
          [...taken].map(([reason, count]) => ({ minute: sql`date_trunc('minute', now())`, reason, count })),
        )
        .onConflictDoUpdate({
          target: [refusedNotification.minute, refusedNotification.reason],
          set: { count: sql`${refusedNotification.count} + excluded.count` },
        });
      await db.execute(sql`DELETE FROM refused_notification WHERE minute < now() - interval '1 day'`);
    } catch (error) {
      // Counted again at the next flush.
      for (const [reason, n] of taken) this.counts.set(reason, (this.counts.get(reason) ?? 0) + n);
      throw error;
    }
    return Object.fromEntries(taken);
  }
}
