import { sql } from "drizzle-orm";
import type { Tx } from "~/server/db/client";
import { REFUNDS_THAT_RETURN_NOTHING } from "~/server/db/schema";

const RETURNS_NOTHING = sql.raw(REFUNDS_THAT_RETURN_NOTHING.map((status) => `'${status}'`).join(", "));

/**
 * Failed refunds of this payment that no longer fit beside the refunds that return money (their amount is
 * more than is left of what was paid, or one of their lines more than is left of what was ordered) become
 * REFUND_SUPERSEDED: a Retry would refund too much, so nobody waits on them (no alert, no operator's list).
 * The caller holds the payment's lock, as every refund decision does. `only`: just this refund.
 */
export async function supersedeFailedRefunds(
  tx: Tx,
  payment: { userId: string; id: string },
  why: string,
  only?: string,
): Promise<string[]> {
  const rows = await tx.execute<{ provider_refund_no: string }>(sql`
    UPDATE refund_order r
       SET status = 'REFUND_SUPERSEDED', updated_at = clock_timestamp(),
           failure_reason = coalesce(r.failure_reason, 'rejected') || '; superseded: ' || ${why}
     WHERE r.user_id = ${payment.userId} AND r.payment_id = ${payment.id} AND r.status = 'REFUND_FAILED'
       ${only ? sql`AND r.id = ${only}` : sql``}
       AND (r.amount_cents > (SELECT p.amount_cents FROM payment_order p
                                WHERE p.user_id = r.user_id AND p.id = r.payment_id)
                               - (SELECT coalesce(sum(o.amount_cents), 0) FROM refund_order o
                                   WHERE o.user_id = r.user_id AND o.payment_id = r.payment_id
                                     AND o.status NOT IN (${RETURNS_NOTHING}))
            OR EXISTS (SELECT 1 FROM refund_line l
                         JOIN order_item i ON i.user_id = l.user_id AND i.order_id = l.order_id AND i.sku_id = l.sku_id
                        WHERE l.user_id = r.user_id AND l.refund_id = r.id
                          AND l.quantity > i.quantity
                                - (SELECT coalesce(sum(l2.quantity), 0) FROM refund_line l2
                                     JOIN refund_order o2 ON o2.user_id = l2.user_id AND o2.id = l2.refund_id
                                    WHERE l2.user_id = l.user_id AND l2.order_id = l.order_id AND l2.sku_id = l.sku_id
                                      AND o2.status NOT IN (${RETURNS_NOTHING}))))
    RETURNING r.provider_refund_no`);
  return rows.map((row) => row.provider_refund_no);
}
