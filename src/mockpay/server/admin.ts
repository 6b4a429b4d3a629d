import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { z } from "zod";
import type { MockPayDb } from "./db";
import { type DeliveryDeps, type DeliveryFault, type DeliveryResult, sendNotification } from "./delivery";
import { MockPayError } from "./errors";
import { providerDeliveryAttempt, providerNotification, providerTrade } from "./schema";
import { getTrade, queueNotification } from "./trades";

/** Actions on one notification (the rest act on the whole trade). */
export const NOTIFICATION_ACTIONS = [
  "FIRE_CONCURRENT",
  "RESEND",
  "TAMPERED_SIGNATURE",
  "WRONG_AMOUNT",
  "STALE_TIMESTAMP",
] as const;

/** What the provider admin page can do to one trade's notifications. */
export const ADMIN_ACTIONS = [
  "FIRE_CONCURRENT",
  "RESEND",
  "TAMPERED_SIGNATURE",
  "WRONG_AMOUNT",
  "STALE_TIMESTAMP",
  "CLOSED_AFTER_SUCCESS",
  "DELAY",
  "REORDER",
  "DROP_ON",
  "DROP_OFF",
  "REJECT_REFUNDS",
  "FAIL_REFUNDS",
  "SILENT_REFUNDS",
] as const;
export type AdminAction = (typeof ADMIN_ACTIONS)[number];

export const adminActionInput = z.object({
  action: z.enum(ADMIN_ACTIONS),
  count: z.coerce.number().int().min(1).max(50).default(10),
  delayS: z.coerce.number().int().min(1).max(3600).default(30),
  /** Which of the trade's notifications to send (default: the first, the payment's). */
  notificationId: z.string().max(100).optional(),
});
export type AdminActionInput = z.infer<typeof adminActionInput>;

const FAULTS: Partial<Record<AdminAction, DeliveryFault>> = {
  TAMPERED_SIGNATURE: "TAMPERED_SIGNATURE",
  WRONG_AMOUNT: "WRONG_AMOUNT",
  STALE_TIMESTAMP: "STALE_TIMESTAMP",
};

const REFUND_FAULTS = {
  REJECT_REFUNDS: "rejectRefunds",
  FAIL_REFUNDS: "failRefunds",
  SILENT_REFUNDS: "silentRefunds",
} as const;

/** Manual sends are recorded with attempt number 0, beside the scheduled ones. */
const MANUAL = 0;

export async function runAdminAction(
  db: MockPayDb,
  appId: string,
  outTradeNo: string,
  input: AdminActionInput,
  deps: DeliveryDeps,
): Promise<DeliveryResult[]> {
  const trade = await getTrade(db, appId, outTradeNo);
  const notifications = await db
    .select()
    .from(providerNotification)
    .where(eq(providerNotification.tradeId, trade.id))
    .orderBy(providerNotification.createdAt);
  const primary = notifications.find((n) => n.id === input.notificationId) ?? notifications[0];
  const needsNotification = () => {
    if (!primary)
      throw new MockPayError(
        "INVALID_REQUEST",
        "this trade has no notification yet (pay or cancel it first)",
      );
    return primary;
  };
  switch (input.action) {
    case "DROP_ON":
    case "DROP_OFF":
      await db
        .update(providerTrade)
        .set({ dropNotifications: input.action === "DROP_ON", updatedAt: sql`now()` })
        .where(eq(providerTrade.id, trade.id));
      return [];
    case "REJECT_REFUNDS":
    case "FAIL_REFUNDS":
    case "SILENT_REFUNDS":
      // The next `count` refund requests on this trade are rejected ("risk control"), or accepted and then
      // fail (`refund.failed`), or decided without a notification; a retry after that goes through.
      await db
        .update(providerTrade)
        .set({ [REFUND_FAULTS[input.action]]: input.count, updatedAt: sql`now()` })
        .where(eq(providerTrade.id, trade.id));
      return [];
    case "DELAY":
      await db
        .update(providerNotification)
        .set({ nextAttemptAt: sql`now() + ${input.delayS} * interval '1 second'` })
        .where(and(eq(providerNotification.tradeId, trade.id), eq(providerNotification.status, "PENDING")));
      return [];
    case "CLOSED_AFTER_SUCCESS": {
      if (trade.status !== "PAID")
        throw new MockPayError("INVALID_REQUEST", "only a paid trade can be closed late");
      // Sent now, and queued too (so redelivered until acknowledged, as the provider's other facts are).
      await queueNotification(db, trade, "payment.closed");
      const [closed] = await db
        .select()
        .from(providerNotification)
        .where(
          and(eq(providerNotification.tradeId, trade.id), eq(providerNotification.factKey, "payment.closed")),
        );
      return closed
        ? [
            await sendNotification(
              db,
              closed,
              trade,
              { attemptNo: MANUAL, kind: "CLOSED_AFTER_SUCCESS" },
              deps,
            ),
          ]
        : [];
    }
    case "FIRE_CONCURRENT": {
      const notification = needsNotification();
      return Promise.all(
        Array.from({ length: input.count }, () =>
          sendNotification(db, notification, trade, { attemptNo: MANUAL, kind: "MANUAL_CONCURRENT" }, deps),
        ),
      );
    }
    case "REORDER": {
      // Newest fact first: what a merchant sees when a provider's queue reorders.
      const results: DeliveryResult[] = [];
      for (const notification of [...notifications].reverse()) {
        results.push(
          await sendNotification(db, notification, trade, { attemptNo: MANUAL, kind: "REORDERED" }, deps),
        );
      }
      return results;
    }
    default: {
      const notification = needsNotification();
      const fault = FAULTS[input.action];
      return [
        await sendNotification(
          db,
          notification,
          trade,
          { attemptNo: MANUAL, kind: "MANUAL_RESEND", fault },
          deps,
        ),
      ];
    }
  }
}

/** The admin page's data: latest trades, their notifications and every delivery attempt. */
export async function listTradesForAdmin(db: MockPayDb, limit = 25) {
  const trades = await db.select().from(providerTrade).orderBy(desc(providerTrade.createdAt)).limit(limit);
  if (trades.length === 0) return [];
  const notifications = await db
    .select()
    .from(providerNotification)
    .where(
      inArray(
        providerNotification.tradeId,
        trades.map((trade) => trade.id),
      ),
    )
    .orderBy(providerNotification.createdAt);
  const attempts = notifications.length
    ? await db
        .select()
        .from(providerDeliveryAttempt)
        .where(
          inArray(
            providerDeliveryAttempt.notificationId,
            notifications.map((n) => n.id),
          ),
        )
        .orderBy(providerDeliveryAttempt.startedAt)
    : [];
  return trades.map((trade) => ({
    trade,
    notifications: notifications
      .filter((n) => n.tradeId === trade.id)
      .map((n) => ({ notification: n, attempts: attempts.filter((a) => a.notificationId === n.id) })),
  }));
}
