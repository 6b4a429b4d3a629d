import { type SQL, sql } from "drizzle-orm";
import type { Tx } from "~/server/db/client";
import { onlyFrom, REFUND_MACHINE } from "~/server/db/machines";
import type { RefundStatus } from "~/server/db/schema";
import { refundOrder } from "~/server/db/schema";
import { type LedgerRefund, postRefundMove, refundableOf } from "~/server/ledger/ledger";
import type { OwedRefund } from "~/server/payments/refunds-port";

export interface MovedRefund extends LedgerRefund {
  refundNo: string;
  /** The status it left. */
  was: RefundStatus;
}

interface MoveOptions {
  /** The rejection's reason (to REFUND_FAILED); `null` clears it (a Retry). Left as it is when absent. */
  failureReason?: string | null;
  /** The provider's attempt number of the send it accepted (to REFUND_PROCESSING). */
  providerAttempt?: number;
  /** Only while this send holds the refund's send claim (submit.ts): an answer no other send can have crossed. */
  sendClaim?: string;
}

export type RefundTransition = keyof typeof REFUND_MACHINE.transitions;

/**
 * Moves one refund by a transition of its machine (db/machines.ts): from any of its FROM states to its TO, by
 * a conditional update, and posts the money that moves with
 * it to the ledger in the same transaction (ledger.ts: where each status puts a refund's amount). Zero rows
 * (undefined) means it was not in `from` any more: someone else moved it first. A move out of a rejection
 * (a Retry: to REFUND_CREATED, or to REFUND_AWAITING_GOODS for goods that shipped) is the refund's next attempt.
 */
export async function moveRefund(
  tx: Tx,
  refund: { userId: string; id: string },
  transition: RefundTransition,
  options: MoveOptions = {},
): Promise<MovedRefund | undefined> {
  const { from, to } = REFUND_MACHINE.transitions[transition];
  const reason: SQL =
    options.failureReason === undefined ? sql`r.failure_reason` : sql`${options.failureReason}`;
  const attempt: SQL =
    options.providerAttempt === undefined ? sql`r.provider_attempt` : sql`${options.providerAttempt}`;
  const [moved] = await tx.execute<{
    id: string;
    user_id: string;
    order_id: string;
    payment_id: string;
    provider_refund_no: string;
    refund_no: string;
    attempt: number;
    amount_cents: string;
    currency: string;
    was: RefundStatus;
  }>(sql`
    UPDATE refund_order r
       SET status = ${to}, updated_at = clock_timestamp(), failure_reason = ${reason}, provider_attempt = ${attempt},
           -- To be sent again (a Retry, a return received): its next send is another's, whatever an earlier one held.
           send_claim = CASE WHEN ${to} = 'REFUND_CREATED' THEN NULL ELSE r.send_claim END,
           send_until = CASE WHEN ${to} = 'REFUND_CREATED' THEN NULL ELSE r.send_until END,
           attempt = r.attempt + (CASE WHEN ${to} IN ('REFUND_CREATED', 'REFUND_AWAITING_GOODS')
                                            AND was.status IN ('REFUND_FAILED', 'REFUND_SUPERSEDED') THEN 1 ELSE 0 END)
      FROM (SELECT id, status FROM refund_order
             WHERE user_id = ${refund.userId} AND id = ${refund.id} AND status = ANY(${sql.param([...from])}::text[])
                   ${options.sendClaim === undefined ? sql`` : sql`AND send_claim = ${options.sendClaim}`}
             FOR UPDATE) was
     WHERE r.user_id = ${refund.userId} AND r.id = was.id
    RETURNING r.id, r.user_id, r.order_id, r.payment_id, r.provider_refund_no, r.refund_no, r.attempt,
              r.amount_cents, r.currency, was.status AS was`);
  if (!moved) return undefined;
  const result: MovedRefund = {
    id: moved.id,
    userId: moved.user_id,
    orderId: moved.order_id,
    paymentId: moved.payment_id,
    providerRefundNo: moved.provider_refund_no,
    refundNo: moved.refund_no,
    attempt: moved.attempt,
    amountCents: Number(moved.amount_cents),
    currency: moved.currency,
    was: moved.was,
  };
  await postRefundMove(tx, result, result.was, to);
  return result;
}

/**
 * The refund `r` (in the query) names a line for more units than are left of it: ordered, less what refunds
 * that took money back (or may still) named.
 */
export const A_LINE_NO_LONGER_FITS = sql`EXISTS (
  SELECT 1 FROM refund_line l
    JOIN order_item i ON i.user_id = l.user_id AND i.order_id = l.order_id AND i.sku_id = l.sku_id
   WHERE l.user_id = r.user_id AND l.refund_id = r.id
     AND l.quantity > i.quantity
           - (SELECT coalesce(sum(l2.quantity), 0) FROM refund_line l2
                JOIN refund_order o2 ON o2.user_id = l2.user_id AND o2.id = l2.refund_id
               WHERE l2.user_id = l.user_id AND l2.order_id = l.order_id AND l2.sku_id = l.sku_id
                 AND o2.status NOT IN ('REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED')))`;

/**
 * The refund `r` (in the query) names a line for more units than the order's shipment left behind: ordered,
 * less shipped, less what other refunds that paid (or may still pay) for units never shipped named. Such a
 * refund cannot pay for units that never shipped: the goods are with the shopper, and must come back first.
 * False before the order ships, and for a return whose goods came back (they are here).
 */
export const A_LINE_SHIPPED = sql`NOT EXISTS (SELECT 1 FROM return_receipt x WHERE x.user_id = r.user_id AND x.refund_id = r.id)
  AND EXISTS (
  SELECT 1 FROM refund_line l
    JOIN order_item i ON i.user_id = l.user_id AND i.order_id = l.order_id AND i.sku_id = l.sku_id
    JOIN shipment s ON s.user_id = l.user_id AND s.order_id = l.order_id
   WHERE l.user_id = r.user_id AND l.refund_id = r.id
     AND l.quantity > i.quantity
           - coalesce((SELECT sl.quantity FROM shipment_line sl
                        WHERE sl.user_id = l.user_id AND sl.order_id = l.order_id AND sl.sku_id = l.sku_id), 0)
           - (SELECT coalesce(sum(l2.quantity), 0) FROM refund_line l2
                JOIN refund_order o2 ON o2.user_id = l2.user_id AND o2.id = l2.refund_id
               WHERE l2.user_id = l.user_id AND l2.order_id = l.order_id AND l2.sku_id = l.sku_id
                 AND o2.id <> r.id AND o2.status IN ('REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_SUCCESS')
                 AND NOT EXISTS (SELECT 1 FROM return_receipt x WHERE x.user_id = o2.user_id AND x.refund_id = o2.id)))`;

/**
 * Restates the rejected refunds of a payment after any refund of it moved: a rejected refund that still fits
 * beside what the payment keeps (the ledger's revenue balance, and for its lines what is left of them) is
 * REFUND_FAILED, awaiting a person; one that no longer fits is REFUND_SUPERSEDED, awaited by nobody (a Retry
 * would refund too much). Both ways: a refund that superseded others and then failed itself gives them back
 * their place, and they alert again. The caller holds the payment's lock, as every refund decision does.
 * Neither status moves money, so nothing is posted. Returns the provider numbers it superseded.
 */
const SUPERSEDE = REFUND_MACHINE.transitions.supersede;
const REINSTATE = REFUND_MACHINE.transitions.reinstate;

export async function restateRejectedRefunds(
  tx: Tx,
  payment: { userId: string; id: string },
  why: string,
): Promise<{ superseded: string[]; failedAgain: string[] }> {
  const refundable = await refundableOf(tx, payment);
  const rows = await tx.execute<{ provider_refund_no: string; status: RefundStatus }>(sql`
    WITH judged AS (
      SELECT r.user_id, r.id, r.status,
             CASE WHEN r.amount_cents > ${refundable}
                    OR ${A_LINE_NO_LONGER_FITS}
                  THEN ${SUPERSEDE.to} ELSE ${REINSTATE.to} END AS judged
        FROM refund_order r
       WHERE r.user_id = ${payment.userId} AND r.payment_id = ${payment.id}
         AND r.status IN (${onlyFrom(SUPERSEDE)}, ${onlyFrom(REINSTATE)}))
    UPDATE refund_order r
       SET status = j.judged, updated_at = clock_timestamp(),
           failure_reason = CASE WHEN j.judged = ${SUPERSEDE.to}
                                 THEN coalesce(r.failure_reason, 'rejected') || '; superseded: ' || ${why}
                                 ELSE regexp_replace(r.failure_reason, '; superseded: .*$', '') END
      FROM judged j
     WHERE r.user_id = j.user_id AND r.id = j.id AND r.status = j.status AND j.judged <> j.status
    RETURNING r.provider_refund_no, r.status`);
  await refundWhatAShortOrderKeeps(tx, payment);
  return {
    superseded: rows.filter((row) => row.status === SUPERSEDE.to).map((row) => row.provider_refund_no),
    failedAgain: rows.filter((row) => row.status === REINSTATE.to).map((row) => row.provider_refund_no),
  };
}

/** Locks a payment's row until the transaction ends: refund decisions about one payment take turns on it. */
export async function lockPayment(tx: Tx, payment: { userId: string; id: string }) {
  await tx.execute(
    sql`SELECT id FROM payment_order WHERE user_id = ${payment.userId} AND id = ${payment.id} FOR UPDATE`,
  );
}

/**
 * An order short of stock keeps nothing. Its automatic refund can be superseded by a refund the shopper had
 * asked for (rejected, then retried and paid first) that took less: what the payment still keeps, with no
 * refund of it under way, is then refunded anew (`sys/auto/<order>/<n>`). Found by the model checker
 * (docs/model.md): without it the order ended STOCK_SHORT holding the difference.
 */
async function refundWhatAShortOrderKeeps(tx: Tx, payment: { userId: string; id: string }) {
  const [short] = await tx.execute<{ order_id: string; currency: string; auto: number }>(sql`
    SELECT o.id AS order_id, p.currency,
           (SELECT count(*)::int FROM refund_order a
             WHERE a.user_id = o.user_id AND a.order_id = o.id AND a.refund_no LIKE 'sys/auto/%') AS auto
      FROM payment_order p JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
     WHERE p.user_id = ${payment.userId} AND p.id = ${payment.id} AND p.status = 'SUCCESS' AND o.status = 'STOCK_SHORT'
       AND NOT EXISTS (SELECT 1 FROM refund_order r
                        WHERE r.user_id = p.user_id AND r.payment_id = p.id
                          AND r.status IN ('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_FAILED'))`);
  if (!short) return;
  const left = await refundableOf(tx, payment);
  if (left <= 0) return;
  await recordSystemRefund(tx, {
    userId: payment.userId,
    refundNo: `sys/auto/${short.order_id}/${short.auto + 1}`,
    orderId: short.order_id,
    paymentId: payment.id,
    amountCents: left,
    currency: short.currency,
    reason: "automatic: what an order short of stock still kept",
  });
}

/**
 * A refund the system owes (its number under `sys/`, which no shopper's may hold): recorded once per number
 * (the unique index decides; a repeat does nothing, and answers false), owed at once in the ledger.
 */
export async function recordSystemRefund(tx: Tx, refund: OwedRefund): Promise<boolean> {
  const [created] = await tx
    .insert(refundOrder)
    .values({ ...refund, status: REFUND_MACHINE.transitions.record.to })
    .onConflictDoNothing({ target: [refundOrder.userId, refundOrder.refundNo] })
    .returning();
  if (created) await postRefundMove(tx, created, "NEW", created.status);
  return created !== undefined;
}
