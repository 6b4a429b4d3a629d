import { and, eq, inArray, sql } from "drizzle-orm";
import type { Db, Tx } from "~/server/db/client";
import { CONSUME_MACHINE } from "~/server/db/machines";
import { messageConsumeRecord, type outboxEvent } from "~/server/db/schema";

const CONSUME = CONSUME_MACHINE.transitions;
export type OutboxEvent = typeof outboxEvent.$inferSelect;

/** What a consumer did with an event. */
export type ConsumeOutcome = "APPLIED" | "SKIPPED" | "DUPLICATE";

export interface Consumer {
  name: string;
  /** Event types it receives. */
  eventTypes: readonly string[];
  /**
   * The business effect, inside the transaction that also marks the event
   * consumed. It must protect itself with a unique key of its own as well: a
   * consume record only proves the event was seen.
   */
  apply: (tx: Tx, event: OutboxEvent) => Promise<"APPLIED" | "SKIPPED">;
}

export interface ConsumeHooks {
  /** Runs after the commit and before the queue hears about it: tests use it to crash there. */
  afterCommit?: (event: OutboxEvent, consumer: string, outcome: ConsumeOutcome) => void | Promise<void>;
}

/**
 * Claims (event, consumer) in message_consume_record, applies the effect and
 * marks the record DONE, all in one transaction. A concurrent duplicate waits
 * on the unique index and then finds the claim taken; a redelivery after a
 * crash finds it DONE. A failure rolls everything back, so the next delivery
 * starts clean.
 */
export async function consumeOnce(
  db: Db,
  event: OutboxEvent,
  consumer: Consumer,
  hooks: ConsumeHooks = {},
): Promise<ConsumeOutcome> {
  const outcome = await db.transaction(async (tx): Promise<ConsumeOutcome> => {
    const [claimed] = await tx
      .insert(messageConsumeRecord)
      .values({
        userId: event.userId,
        eventId: event.id,
        consumerName: consumer.name,
        status: CONSUME.claim.to,
      })
      .onConflictDoNothing({
        target: [
          messageConsumeRecord.userId,
          messageConsumeRecord.eventId,
          messageConsumeRecord.consumerName,
        ],
      })
      .returning({ id: messageConsumeRecord.id });
    if (!claimed) return "DUPLICATE";
    const result = await consumer.apply(tx, event);
    await tx
      .update(messageConsumeRecord)
      .set({ status: CONSUME.finish.to, result, doneAt: sql`now()` })
      .where(
        and(
          eq(messageConsumeRecord.userId, event.userId),
          eq(messageConsumeRecord.id, claimed.id),
          inArray(messageConsumeRecord.status, CONSUME.finish.from),
        ),
      );
    return result;
  });
  await hooks.afterCommit?.(event, consumer.name, outcome);
  return outcome;
}
