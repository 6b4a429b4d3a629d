import { sql } from "drizzle-orm";
import type { Db, Tx } from "~/server/db/client";
import { onlyFrom, PAYMENT_MACHINE } from "~/server/db/machines";
import { refundableOf } from "~/server/ledger/ledger";
import { lockPayment, recordSystemRefund } from "~/server/refunds/transitions";
import { HELD_STOCK, LEDGER_OF_PAYMENT } from "./invariant";
import { EVERY_ORDER, type OrderKey, SCOPE_TABLE, type Scope, withScopeTable } from "./scope";

/**
 * What reconciliation repairs by itself, because only one repair is right and it can be made through the
 * same rows and locks as the code's own transitions:
 *
 * - **Money an order that keeps nothing still holds.** A payment that succeeded for an order that is closed,
 *   short of stock or refunded in full, with money left in its revenue and no refund of it under way or
 *   awaiting a person, is refunded what it holds: a system refund `sys/repair/<payment id>`, once per payment
 *   (its unique number), posted to the ledger as it is recorded; the refund submitter sends it. A closed
 *   order's payment becomes PAID_LATE on the way, as a success that arrived after the close would have.
 * - **Units deducted for a shipped order that never shipped and nothing will give back.** Units the shipment
 *   left behind for a line refund under way stay in the warehouse when that refund is rejected. With no line
 *   refund of the SKU under way any more, they go back to stock, in a record of their own (no refund); a
 *   refund that later pays for them finds them given back already (the stock-return consumer gives back what
 *   the order holds beyond what it should, never twice).
 *
 * Each repair takes the locks the transitions take (the payment, then the order) and reads again, in its
 * next statement, what it found: a refund recorded, a shipment or a Retry committed in between, and it does
 * nothing. Repairs of one order take turns on its lock, so they are made once. What it cannot repair stays a
 * violation, and an alert, for a person.
 */

export interface Repair {
  kind: "money" | "stock";
  orderId: string;
  /** money: the refund recorded. */
  refundNo?: string;
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
  {
    lagSeconds = 60,
    limit = 100,
    orders,
  }: {
    lagSeconds?: number;
    limit?: number;
    /** Among these orders only (an incremental run's); every order when absent. */
    orders?: readonly OrderKey[];
  } = {},
): Promise<Repair[]> {
  const repaired: Repair[] = [];
  if (orders?.length === 0) return repaired;
  // What to repair, found first: among the orders given (held in a transaction of their own), or every order.
  const find = async (run: Db | Tx, scope: Scope) => ({
    payments: await run.execute<{ user_id: string; payment_id: string; order_id: string }>(sql`
      SELECT p.user_id, p.id AS payment_id, p.order_id
        FROM payment_order p
        JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
        CROSS JOIN LATERAL (${LEDGER_OF_PAYMENT}) l
       WHERE p.status = 'SUCCESS' AND o.status IN ${KEEPS_NOTHING} AND l.revenue > 0
         AND ${scope.orders(sql`o.user_id`, sql`o.id`)}
         AND o.updated_at < now() - ${lagSeconds} * interval '1 second'
         AND p.updated_at < now() - ${lagSeconds} * interval '1 second'
         AND NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id
                           AND r.status IN ${ACTED_ON})
       LIMIT ${limit}`),
    units: await run.execute<{ user_id: string; order_id: string; sku_id: string }>(sql`
      SELECT h.user_id, h.order_id, h.sku_id FROM (${HELD_STOCK}) h
        JOIN orders o ON o.user_id = h.user_id AND o.id = h.order_id
       WHERE ${LEFT_BEHIND_FOR_NOTHING} AND ${scope.orders(sql`o.user_id`, sql`o.id`)}
         AND o.updated_at < now() - ${lagSeconds} * interval '1 second'
       LIMIT ${limit}`),
  });
  const { payments, units } = orders
    ? await withScopeTable(db, orders, (tx) => find(tx, SCOPE_TABLE))
    : await find(db, EVERY_ORDER);
  for (const found of payments) {
    const repair = await db.transaction((tx) =>
      refundWhatItHolds(tx, { userId: found.user_id, id: found.payment_id, orderId: found.order_id }),
    );
    if (repair) repaired.push(repair);
  }
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
 * Per (order, SKU) of a HELD_STOCK row `h`, once the order has shipped: units deducted that never shipped and are
 * still held. Deducted, less shipped, less what went back for anything but a return (a return's goods shipped
 * and came back: they are the stock-return consumer's to give back, once received, however late it runs).
 */
const NEVER_SHIPPED_HELD = sql`(
  (SELECT d.quantity FROM stock_deduct_record d
    WHERE d.user_id = h.user_id AND d.order_id = h.order_id AND d.sku_id = h.sku_id)
  - coalesce((SELECT sl.quantity FROM shipment_line sl
               WHERE sl.user_id = h.user_id AND sl.order_id = h.order_id AND sl.sku_id = h.sku_id), 0)
  - coalesce((SELECT sum(sr.quantity) FROM stock_return_record sr
               WHERE sr.user_id = h.user_id AND sr.order_id = h.order_id AND sr.sku_id = h.sku_id
                 AND NOT EXISTS (SELECT 1 FROM return_receipt x
                                  WHERE x.user_id = sr.user_id AND x.refund_id = sr.refund_id)), 0))::int`;

/**
 * The order `h` (a HELD_STOCK row) has shipped and still holds units of the SKU that never shipped, and no line
 * refund of that SKU is under way (whose units the shipment rightly left behind, to go back when it succeeds).
 */
const LEFT_BEHIND_FOR_NOTHING = sql`
  EXISTS (SELECT 1 FROM shipment s WHERE s.user_id = h.user_id AND s.order_id = h.order_id)
  AND ${NEVER_SHIPPED_HELD} > 0
  AND NOT EXISTS (SELECT 1 FROM refund_line l JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id
                   WHERE l.user_id = h.user_id AND l.order_id = h.order_id AND l.sku_id = h.sku_id
                     AND r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING'))`;

/**
 * Under the order's lock, read again: the units go back to stock in a record of their own (no refund: a refund's
 * key stays free for the stock its own goods may give back later, a return of them received, say).
 */
async function returnUnitsLeftBehind(
  tx: Tx,
  unit: { userId: string; orderId: string; skuId: string },
): Promise<Repair | undefined> {
  await tx.execute(
    sql`SELECT id FROM orders WHERE user_id = ${unit.userId} AND id = ${unit.orderId} FOR UPDATE`,
  );
  const [still] = await tx.execute<{ excess: number }>(sql`
    SELECT ${NEVER_SHIPPED_HELD} AS excess FROM (${HELD_STOCK}) h
     WHERE h.user_id = ${unit.userId} AND h.order_id = ${unit.orderId} AND h.sku_id = ${unit.skuId}
       AND ${LEFT_BEHIND_FOR_NOTHING}`);
  if (!still || still.excess <= 0) return undefined;
  await tx.execute(sql`
    INSERT INTO stock_return_record (user_id, refund_id, order_id, sku_id, quantity)
    VALUES (${unit.userId}, NULL, ${unit.orderId}, ${unit.skuId}, ${still.excess})`);
  await tx.execute(sql`UPDATE sku SET stock = stock + ${still.excess} WHERE id = ${unit.skuId}`);
  return { kind: "stock", orderId: unit.orderId, skuId: unit.skuId, quantity: still.excess };
}
