import { sql } from "drizzle-orm";
import type { Tx } from "~/server/db/client";
import type { OrderRef } from "~/server/db/order-ref";
import type { OrderStatus } from "~/server/db/schema";

/**
 * What an order should hold, and what it holds, of stock and loyalty points. The consumers
 * bring the second to the first under the order's row lock, so a refund completing in any
 * order relative to fulfilment ends with the same holdings:
 * - stock, before the order ships: every ordered unit, less the lines that successful refunds
 *   gave back; nothing once the order is refunded in full (nothing will ship);
 * - stock, once it has shipped: what the shipment carried, less what came back (return
 *   receipts): goods with the shopper stay out of stock, whatever money goes back;
 * - points: one per whole currency unit of the net amount paid (paid less successful refunds).
 */
export async function stockTarget(tx: Tx, order: OrderRef, status: OrderStatus | undefined) {
  const shipped = await shippedLessReceived(tx, order);
  return shipped ?? (await targetBeforeShipping(tx, order, status));
}

/** Per SKU: what the order's shipment carried less what was received back; undefined before it ships. */
async function shippedLessReceived(tx: Tx, { userId, orderId }: OrderRef) {
  const rows = await tx.execute<{ sku_id: string; quantity: number }>(sql`
    SELECT s.sku_id, (s.quantity - coalesce((
             SELECT sum(r.quantity) FROM return_receipt r
              WHERE r.user_id = s.user_id AND r.order_id = s.order_id AND r.sku_id = s.sku_id), 0))::int AS quantity
      FROM shipment_line s WHERE s.user_id = ${userId} AND s.order_id = ${orderId} ORDER BY s.sku_id`);
  if (rows.length === 0) return undefined;
  return new Map(rows.map((row) => [row.sku_id, Math.max(0, row.quantity)]));
}

async function targetBeforeShipping(tx: Tx, { userId, orderId }: OrderRef, status: OrderStatus | undefined) {
  const rows = await tx.execute<{ sku_id: string; quantity: number }>(sql`
    SELECT i.sku_id, (i.quantity - coalesce((
             SELECT sum(l.quantity) FROM refund_line l
               JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id
              WHERE l.user_id = i.user_id AND l.order_id = i.order_id AND l.sku_id = i.sku_id
                AND r.status = 'REFUND_SUCCESS'), 0))::int AS quantity
      FROM order_item i WHERE i.user_id = ${userId} AND i.order_id = ${orderId} ORDER BY i.sku_id`);
  return new Map(rows.map((row) => [row.sku_id, status === "REFUNDED" ? 0 : Math.max(0, row.quantity)]));
}

/**
 * Per SKU: units of line refunds still under way (to be sent or sent, not yet succeeded). A shipment
 * leaves them behind: if the refund succeeds they go back to stock, not to the shopper.
 */
export async function unitsBeingRefunded(tx: Tx, { userId, orderId }: OrderRef) {
  const rows = await tx.execute<{ sku_id: string; quantity: number }>(sql`
    SELECT l.sku_id, sum(l.quantity)::int AS quantity FROM refund_line l
      JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id
     WHERE l.user_id = ${userId} AND l.order_id = ${orderId} AND r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING')
     GROUP BY l.sku_id`);
  return new Map(rows.map((row) => [row.sku_id, row.quantity]));
}

/** Per SKU: deducted less returned, for the SKUs the order took stock of. */
export async function stockHeld(tx: Tx, { userId, orderId }: OrderRef) {
  const rows = await tx.execute<{ sku_id: string; quantity: number }>(sql`
    SELECT d.sku_id, (d.quantity - coalesce((
             SELECT sum(r.quantity) FROM stock_return_record r
              WHERE r.user_id = d.user_id AND r.order_id = d.order_id AND r.sku_id = d.sku_id), 0))::int AS quantity
      FROM stock_deduct_record d WHERE d.user_id = ${userId} AND d.order_id = ${orderId} ORDER BY d.sku_id`);
  return new Map(rows.map((row) => [row.sku_id, row.quantity]));
}

export async function pointsTarget(tx: Tx, { userId, orderId }: OrderRef, status: OrderStatus | undefined) {
  if (status === "REFUNDED") return 0;
  const [row] = await tx.execute<{ net: number }>(sql`
    SELECT (o.amount_cents - coalesce((SELECT sum(r.amount_cents) FROM refund_order r
                                          JOIN payment_order p
                                            ON p.user_id = r.user_id AND p.id = r.payment_id AND p.status = 'SUCCESS'
                                         WHERE r.user_id = o.user_id AND r.order_id = o.id
                                           AND r.status = 'REFUND_SUCCESS'), 0))::bigint AS net
      FROM orders o WHERE o.user_id = ${userId} AND o.id = ${orderId}`);
  return Math.max(0, Math.floor(Number(row?.net ?? 0) / 100));
}

/** Points granted less points taken back; undefined when none were granted. */
export async function pointsHeld(tx: Tx, { userId, orderId }: OrderRef): Promise<number | undefined> {
  const [row] = await tx.execute<{ granted: number | null; reversed: number }>(sql`
    SELECT (SELECT amount FROM benefit_grant
             WHERE user_id = ${userId} AND order_id = ${orderId} AND benefit_type = 'LOYALTY_POINTS') AS granted,
           coalesce((SELECT sum(amount) FROM benefit_reversal
                      WHERE user_id = ${userId} AND order_id = ${orderId}
                        AND benefit_type = 'LOYALTY_POINTS'), 0)::int AS reversed`);
  if (row?.granted === null || row?.granted === undefined) return undefined;
  return row.granted - row.reversed;
}

export async function hasShipped(tx: Tx, { userId, orderId }: OrderRef): Promise<boolean> {
  const [row] = await tx.execute<{ shipped: boolean }>(sql`
    SELECT EXISTS (SELECT 1 FROM shipment_line WHERE user_id = ${userId} AND order_id = ${orderId}) AS shipped`);
  return row?.shipped ?? false;
}

/** Per SKU, the goods one refund stands for: what was received back of it (a return), else the lines it names. */
export async function unitsOfRefund(tx: Tx, { userId }: OrderRef, refundId: string) {
  const rows = await tx.execute<{ sku_id: string; quantity: number }>(sql`
    SELECT l.sku_id, coalesce(rr.quantity, CASE WHEN r.status = 'REFUND_SUCCESS' AND NOT EXISTS (
                                                  SELECT 1 FROM return_receipt x WHERE x.user_id = r.user_id AND x.refund_id = r.id)
                                                THEN l.quantity ELSE 0 END)::int AS quantity
      FROM refund_line l
      JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id
      LEFT JOIN return_receipt rr ON rr.user_id = l.user_id AND rr.refund_id = l.refund_id AND rr.sku_id = l.sku_id
     WHERE l.user_id = ${userId} AND l.refund_id = ${refundId}`);
  return new Map(rows.map((row) => [row.sku_id, row.quantity]));
}
