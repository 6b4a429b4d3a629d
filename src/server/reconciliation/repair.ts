import { sql } from "drizzle-orm";
import type { Db, Tx } from "~/server/db/client";
import { onlyFrom, PAYMENT_MACHINE } from "~/server/db/machines";
import { refundableOf } from "~/server/ledger/ledger";
import { lockPayment, recordSystemRefund } from "~/server/refunds/transitions";
import { HELD_STOCK, LEDGER_OF_PAYMENT } from "./invariant";

/**
 * What reconciliation repairs by itself, because only one repair is right and it can be made through the
 * same rows and locks as the code's own transitions:
 *
 * - **Money an order that keeps nothing still holds.** A payment that succeeded for an order that is closed,
 *   short of stock or refunded in full, with money left in its revenue and no refund of it under way or
 *   awaiting a person, is refunded what it holds: a system refund `sys/repair/<payment id>`, once per payment
 *   (its unique number), posted to the ledger as it is recorded; the refund submitter sends it. A closed
 *   order's payment becomes PAID_LATE on the way, as a success that arrived after the close would have.
 * - **Units deducted for a shipped order and never shipped, for a line refund that failed.** Units the
 *   shipment left behind for a refund under way stay in the warehouse when that refund is rejected: they go
 *   back to stock under that refund (`stock_return_record`, once per refund and SKU), as the stock-return
 *   consumer would have given them back had it succeeded.
 *
 * Each repair takes the locks the transitions take (the payment, then the order) and reads again, in its
 * next statement, what it found: a refund recorded, a shipment or a Retry committed in between, and it does
 * nothing. What it cannot repair stays a violation, and an alert, for a person.
 */

export interface Repair {
  kind: "money" | "stock";
  orderId: string;
  /** money: the refund recorded; stock: the rejected refund the units were left behind for. */
  refundNo: string;
  /** money: how much goes back. */
  amountCents?: number;
  currency?: string;
  /** stock: which units went back, and how many. */
  skuId?: string;
  quantity?: number;
}

/** Orders in these states keep nothing of what they were paid. */
const KEEPS_NOTHING = sql`('CLOSED', 'STOCK_SHORT', 'REFUNDED')`;
/** Refunds someone (the provider, the shopper's goods, a person) is still acting on. */
const ACTED_ON = sql`('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_FAILED')`;

export const repairRefundNo = (paymentId: string) => `sys/repair/${paymentId}`;

const REPAIR_LATE = PAYMENT_MACHINE.transitions.repairLate;

/**
 * Finds what is safe to repair (settled for `lagSeconds`, at most `limit` of each kind) and repairs it, one
 * transaction each. Returns what it repaired.
 */
export async function repairWhatIsSafe(
  db: Db,
  { lagSeconds = 60, limit = 100 }: { lagSeconds?: number; limit?: number } = {},
): Promise<Repair[]> {
  const repaired: Repair[] = [];
  const payments = await db.execute<{ user_id: string; payment_id: string; order_id: string }>(sql`
    SELECT p.user_id, p.id AS payment_id, p.order_id
      FROM payment_order p
      JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
      CROSS JOIN LATERAL (${LEDGER_OF_PAYMENT}) l
     WHERE p.status = 'SUCCESS' AND o.status IN ${KEEPS_NOTHING} AND l.revenue > 0
       AND o.updated_at < now() - ${lagSeconds} * interval '1 second'
       AND p.updated_at < now() - ${lagSeconds} * interval '1 second'
       AND NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id
                         AND r.status IN ${ACTED_ON})
     LIMIT ${limit}`);
  for (const found of payments) {
    const repair = await db.transaction((tx) =>
      refundWhatItHolds(tx, { userId: found.user_id, id: found.payment_id, orderId: found.order_id }),
    );
    if (repair) repaired.push(repair);
  }
  const units = await db.execute<{ user_id: string; order_id: string; sku_id: string }>(sql`
    SELECT h.user_id, h.order_id, h.sku_id FROM (${HELD_STOCK}) h
      JOIN orders o ON o.user_id = h.user_id AND o.id = h.order_id
     WHERE ${LEFT_BEHIND_FOR_NOTHING}
       AND o.updated_at < now() - ${lagSeconds} * interval '1 second'
     LIMIT ${limit}`);
  for (const found of units) {
    const repair = await db.transaction((tx) =>
      returnUnitsLeftBehind(tx, { userId: found.user_id, orderId: found.order_id, skuId: found.sku_id }),
    );
    if (repair) repaired.push(repair);
  }
  return repaired;
}

/** The payment keeps nothing: its order's, locked, and no refund of it acted on. Under both locks, read again. */
async function refundWhatItHolds(
  tx: Tx,
  payment: { userId: string; id: string; orderId: string },
): Promise<Repair | undefined> {
  await lockPayment(tx, payment);
  await tx.execute(
    sql`SELECT id FROM orders WHERE user_id = ${payment.userId} AND id = ${payment.orderId} FOR UPDATE`,
  );
  const [still] = await tx.execute<{ currency: string; order_status: string }>(sql`
    SELECT p.currency, o.status AS order_status FROM payment_order p JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
     WHERE p.user_id = ${payment.userId} AND p.id = ${payment.id} AND p.status = 'SUCCESS'
       AND o.status IN ${KEEPS_NOTHING}
       AND NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id
                         AND r.status IN ${ACTED_ON})`);
  if (!still) return undefined;
  const holds = await refundableOf(tx, payment);
  if (holds <= 0) return undefined;
  // A closed order was never paid: the money is a late payment's, as if it had arrived after the close.
  if (still.order_status === "CLOSED") {
    await tx.execute(sql`
      UPDATE payment_order SET status = ${REPAIR_LATE.to}, updated_at = now()
       WHERE user_id = ${payment.userId} AND id = ${payment.id} AND status = ${onlyFrom(REPAIR_LATE)}`);
  }
  const refundNo = repairRefundNo(payment.id);
  const recorded = await recordSystemRefund(tx, {
    userId: payment.userId,
    refundNo,
    orderId: payment.orderId,
    paymentId: payment.id,
    amountCents: holds,
    currency: still.currency,
    reason: "repair: the order keeps nothing, and its payment still held money",
  });
  return recorded
    ? { kind: "money", orderId: payment.orderId, refundNo, amountCents: holds, currency: still.currency }
    : undefined;
}

/**
 * The order `h` (a HELD_STOCK row, with `o` its order) has shipped, holds more of the SKU than it shipped
 * less what came back, and no line refund of that SKU is under way (whose units the shipment rightly left
 * behind).
 */
const LEFT_BEHIND_FOR_NOTHING = sql`
  EXISTS (SELECT 1 FROM shipment s WHERE s.user_id = h.user_id AND s.order_id = h.order_id)
  AND h.held > coalesce((SELECT sl.quantity FROM shipment_line sl
                          WHERE sl.user_id = h.user_id AND sl.order_id = h.order_id AND sl.sku_id = h.sku_id), 0)
             - coalesce((SELECT sum(rr.quantity) FROM return_receipt rr
                          WHERE rr.user_id = h.user_id AND rr.order_id = h.order_id AND rr.sku_id = h.sku_id), 0)
  AND NOT EXISTS (SELECT 1 FROM refund_line l JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id
                   WHERE l.user_id = h.user_id AND l.order_id = h.order_id AND l.sku_id = h.sku_id
                     AND r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING'))`;

/** Under the order's lock, read again: the units left behind for a rejected line refund go back to stock under it. */
async function returnUnitsLeftBehind(
  tx: Tx,
  unit: { userId: string; orderId: string; skuId: string },
): Promise<Repair | undefined> {
  await tx.execute(
    sql`SELECT id FROM orders WHERE user_id = ${unit.userId} AND id = ${unit.orderId} FOR UPDATE`,
  );
  const [still] = await tx.execute<{
    excess: number;
    refund_id: string | null;
    refund_no: string | null;
  }>(sql`
    SELECT (h.held - coalesce((SELECT sl.quantity FROM shipment_line sl
                                WHERE sl.user_id = h.user_id AND sl.order_id = h.order_id AND sl.sku_id = h.sku_id), 0)
                   + coalesce((SELECT sum(rr.quantity) FROM return_receipt rr
                                WHERE rr.user_id = h.user_id AND rr.order_id = h.order_id AND rr.sku_id = h.sku_id), 0))::int AS excess,
           r.id AS refund_id, r.refund_no
      FROM (${HELD_STOCK}) h
      LEFT JOIN LATERAL (
        SELECT r.id, r.refund_no FROM refund_order r JOIN refund_line l ON l.user_id = r.user_id AND l.refund_id = r.id
         WHERE r.user_id = h.user_id AND r.order_id = h.order_id AND l.sku_id = h.sku_id
           AND r.status IN ('REFUND_FAILED', 'REFUND_SUPERSEDED')
         ORDER BY r.updated_at DESC LIMIT 1) r ON true
     WHERE h.user_id = ${unit.userId} AND h.order_id = ${unit.orderId} AND h.sku_id = ${unit.skuId}
       AND ${LEFT_BEHIND_FOR_NOTHING}`);
  // Nothing left behind any more, or no rejected refund it was left for (not ours to guess: a person's).
  if (!still?.refund_id || !still.refund_no || still.excess <= 0) return undefined;
  const given = await tx.execute<{ id: string }>(sql`
    INSERT INTO stock_return_record (user_id, refund_id, order_id, sku_id, quantity)
    VALUES (${unit.userId}, ${still.refund_id}, ${unit.orderId}, ${unit.skuId}, ${still.excess})
    ON CONFLICT (user_id, refund_id, sku_id) DO NOTHING RETURNING id`);
  if (given.length === 0) return undefined;
  await tx.execute(sql`UPDATE sku SET stock = stock + ${still.excess} WHERE id = ${unit.skuId}`);
  return {
    kind: "stock",
    orderId: unit.orderId,
    refundNo: still.refund_no,
    skuId: unit.skuId,
    quantity: still.excess,
  };
}
