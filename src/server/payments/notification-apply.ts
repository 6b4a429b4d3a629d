import { and, eq, inArray, sql } from "drizzle-orm";
import { clientOf, type Tx } from "~/server/db/client";
import { absorbedByUpdate, ORDER_MACHINE, onlyFrom, PAYMENT_MACHINE } from "~/server/db/machines";
import { paymentOrder } from "~/server/db/schema";
import { postCapture } from "~/server/ledger/ledger";
import type { NotificationBody } from "~/shared/provider-contract";
import type { TransactionSteps } from "~/shared/transaction-steps";
import type { RefundsPort } from "./refunds-port";
import { ok, refuse, type Verdict } from "./verdict";

/**
 * Applies one fact from the provider (a notification, or the answer to a status
 * query) through conditional transitions. Call it inside a transaction.
 */
export async function applyProviderFact(tx: Tx, n: NotificationBody, refunds: RefundsPort): Promise<Verdict> {
  const [payment] = await tx.select().from(paymentOrder).where(eq(paymentOrder.outTradeNo, n.out_trade_no));
  if (!payment) return refuse("UNKNOWN_PAYMENT", 404, `no payment ${n.out_trade_no}`);
  // Facts about refunds are refunds' to apply.
  if (n.type === "refund.succeeded") return refunds.succeeded(tx, payment, n);
  if (n.type === "refund.failed") return refunds.failed(tx, payment, n);
  if (payment.amountCents !== n.amount_cents || payment.currency !== n.currency) {
    return refuse(
      "AMOUNT_MISMATCH",
      400,
      `expected ${payment.amountCents} ${payment.currency}, notified ${n.amount_cents} ${n.currency}`,
      true,
    );
  }
  switch (n.type) {
    case "payment.succeeded":
      return applySuccess(tx, payment, n, refunds);
    case "payment.closed":
      return applyClosed(tx, payment);
    default:
      return ok("IGNORED", `type ${n.type} is not handled here`);
  }
}

const ORDER = ORDER_MACHINE.transitions;
const PAYMENT = PAYMENT_MACHINE.transitions;

/** A payment as its shopper's rows name it (docs/scale-out.md): every statement below names the shopper. */
interface PaymentKey {
  userId: string;
  id: string;
  orderId: string;
  amountCents: number;
  currency: string;
}

/**
 * The success's transaction as the model takes it (model/checkout.pml, applySuccess): the order's lock, then
 * the payment, then the order, three steps; a copy or another fact is told apart before the lock.
 */
export const APPLY_SUCCESS_STEPS: TransactionSteps = {
  transaction: "payment.succeeded",
  path: "a success for a payment open while its order awaits payment",
  statements: [
    { does: "read the payment", matches: /^select .* from "payment_order"/s, step: null },
    { does: "lock the order; read a clashing transaction id", matches: /FOR UPDATE/, step: "lock" },
    { does: "move the payment", matches: /^\s*UPDATE payment_order p/, step: "move" },
    { does: "post the capture", matches: /^\s*INSERT INTO ledger_transfer/, step: "move" },
    { does: "pay the order and raise OrderPaid", matches: /^\s*WITH paid AS/, step: "pay" },
    { does: "record the notification", matches: /^\s*INSERT INTO payment_notification/, step: "pay" },
  ],
};

async function applySuccess(
  tx: Tx,
  payment: PaymentKey,
  n: NotificationBody,
  refunds: RefundsPort,
): Promise<Verdict> {
  const { userId, id: paymentId, orderId } = payment;
  if (!n.transaction_id) return refuse("MALFORMED", 400, "a success needs a transaction_id");
  // The order's row is locked before anything is decided: the payment's UPDATE below reads whether the order
  // awaits payment, and a cancel or the timeout job closing it must not commit between that read and the
  // order's UPDATE (the payment would take money for a closed order). Order before payment, as a cancel.
  const clash = await lockOrderAndFindClash(tx, payment, n.transaction_id);
  if (clash) return clash;
  // PENDING → SUCCESS while the order awaits payment; and CLOSED → SUCCESS when the close came first
  // only because notifications crossed (a late close, a delayed success): the provider holds the money,
  // the order still awaits it, and no other payment of the order is open — then the provider's success wins.
  // This path's statements are postgres.js templates, not drizzle's builders: it runs once per fact, and
  // building drizzle's costs a tenth of a callback's CPU (docs/benchmark-log.md has the profile).
  const pg = clientOf(tx);
  const [moved] = await pg<{ id: string }[]>`
    UPDATE payment_order p
       SET status = ${PAYMENT.succeed.to}, transaction_id = ${n.transaction_id}, paid_at = now(), updated_at = now()
     WHERE p.user_id = ${userId} AND p.id = ${paymentId}
       AND EXISTS (SELECT 1 FROM orders o
                    WHERE o.user_id = ${userId} AND o.id = ${orderId} AND o.status = ${onlyFrom(ORDER.pay)})
       AND (p.status = ${onlyFrom(PAYMENT.succeed)} OR (
         p.status = ${onlyFrom(PAYMENT.succeedAfterClose)}
         AND NOT EXISTS (SELECT 1 FROM payment_order other
                          WHERE other.user_id = ${userId} AND other.order_id = ${orderId}
                            AND other.id <> ${paymentId} AND other.status IN ('PENDING', 'SUCCESS'))))
    RETURNING p.id`;
  if (moved) await postCapture(tx, payment, n.transaction_id);
  if (!moved) {
    // The money came for a payment that cannot be the order's: it goes back, automatically, once.
    const late = await takeLatePayment(tx, payment, n.transaction_id, refunds);
    if (late) return late;
    // Zero rows: already decided. Say success for the fact we already have.
    const [current] = await tx
      .select({ status: paymentOrder.status, transactionId: paymentOrder.transactionId })
      .from(paymentOrder)
      .where(and(eq(paymentOrder.userId, userId), eq(paymentOrder.id, paymentId)));
    if (
      (current?.status === "SUCCESS" || current?.status === "PAID_LATE") &&
      current.transactionId === n.transaction_id
    ) {
      return ok("DUPLICATE", absorbedByUpdate(PAYMENT_MACHINE, PAYMENT.succeed, current.status));
    }
    return ok(
      "DUPLICATE",
      `${absorbedByUpdate(PAYMENT_MACHINE, PAYMENT.succeed, current?.status)} under transaction ${current?.transactionId}; this one differs`,
      true,
    );
  }
  // The order is paid, and its OrderPaid event written, by one statement: the event only if the order moved.
  const [paid] = await pg<{ id: string }[]>`
    WITH paid AS (
      UPDATE orders SET status = ${ORDER.pay.to}, updated_at = now()
       WHERE user_id = ${userId} AND id = ${orderId} AND status = ${onlyFrom(ORDER.pay)}
      RETURNING id, user_id, amount_cents, currency
    ), event AS (
      INSERT INTO outbox_event (user_id, event_type, aggregate_type, aggregate_id, dedupe_key, payload)
      SELECT user_id, 'OrderPaid', 'order', id::text, 'OrderPaid:' || id::text,
             jsonb_build_object('orderId', id, 'userId', user_id, 'amountCents', amount_cents, 'currency', currency,
                                'outTradeNo', ${n.out_trade_no}::text, 'transactionId', ${n.transaction_id}::text)
        FROM paid
      ON CONFLICT (user_id, dedupe_key) DO NOTHING
    )
    SELECT id FROM paid`;
  return ok(
    "PROCESSED",
    paid ? "payment succeeded; order paid" : "payment succeeded; order was not awaiting payment",
    !paid,
  );
}

/**
 * Locks the payment's order until the transaction ends, and tells whether the transaction id is taken. A
 * transaction id belongs to one payment (a unique index). A success naming one already recorded on
 * another payment is a provider's bug or a forgery: refused with 409 (TRANSACTION_CLASH, documented in
 * docs/provider-contract.md), recorded and alerted, and nothing changes. The provider may retry; a person decides.
 */
async function lockOrderAndFindClash(
  tx: Tx,
  payment: PaymentKey,
  transactionId: string,
): Promise<Verdict | undefined> {
  // One round trip: the order's lock (a CTE that is read, so it runs) and the clash's read.
  const [found] = await clientOf(tx)<{ outTradeNo: string | null }[]>`
    WITH locked AS (SELECT id FROM orders WHERE user_id = ${payment.userId} AND id = ${payment.orderId} FOR UPDATE)
    SELECT (SELECT count(*) FROM locked) AS locked,
           (SELECT out_trade_no FROM payment_order WHERE transaction_id = ${transactionId} AND id <> ${payment.id}
             LIMIT 1) AS "outTradeNo"`;
  const other = found?.outTradeNo;
  return other
    ? refuse("TRANSACTION_CLASH", 409, `transaction ${transactionId} is already payment ${other}'s`, true)
    : undefined;
}

/**
 * A success on a payment that is not (and cannot become) the order's — the order was closed, or paid
 * by another payment — is PAID_LATE: the money is refunded in full, automatically, under a refund
 * number no shopper can make (`sys/late/<transaction id>`), and the order keeps its state. Alerted
 * until that refund succeeds (admin alert, reconciliation).
 */
async function takeLatePayment(
  tx: Tx,
  payment: PaymentKey,
  transactionId: string,
  refunds: RefundsPort,
): Promise<Verdict | undefined> {
  const [late] = await tx
    .update(paymentOrder)
    .set({ status: PAYMENT.payLate.to, transactionId, paidAt: sql`now()`, updatedAt: sql`now()` })
    .where(
      and(
        eq(paymentOrder.userId, payment.userId),
        eq(paymentOrder.id, payment.id),
        inArray(paymentOrder.status, PAYMENT.payLate.from),
      ),
    )
    .returning();
  if (!late) return undefined;
  await postCapture(tx, late, transactionId);
  await refunds.owed(tx, {
    userId: late.userId,
    refundNo: lateRefundNo(transactionId),
    orderId: late.orderId,
    paymentId: late.id,
    amountCents: late.amountCents,
    currency: late.currency,
    reason: "automatic: money received for a payment that is not the order's",
  });
  return ok("PROCESSED", "paid after the order stopped awaiting this payment: refunded automatically", true);
}

/** System refund numbers hold a "/", which no shopper's refund number may (requestIdSchema). */
export const lateRefundNo = (transactionId: string) => `sys/late/${transactionId}`;

async function applyClosed(tx: Tx, payment: PaymentKey): Promise<Verdict> {
  const [closed] = await tx
    .update(paymentOrder)
    .set({ status: PAYMENT.close.to, updatedAt: sql`now()` })
    .where(
      sql`${paymentOrder.userId} = ${payment.userId} AND ${paymentOrder.id} = ${payment.id} AND ${paymentOrder.status} = ${onlyFrom(PAYMENT.close)}`,
    )
    .returning({ id: paymentOrder.id });
  if (closed) return ok("PROCESSED", "payment closed");
  return ok(
    "IGNORED",
    `${absorbedByUpdate(PAYMENT_MACHINE, PAYMENT.close)} (decided; a late close changes nothing)`,
  );
}
