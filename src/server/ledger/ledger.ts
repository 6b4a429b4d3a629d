import { sql } from "drizzle-orm";
import { clientOf, type Executor, type Tx } from "~/server/db/client";
import { type LedgerAccount, ledgerTransfer, type RefundStatus } from "~/server/db/schema";

/**
 * The money ledger: every movement of money is one transfer between two of a payment's accounts (shopper,
 * revenue, refunds_payable; schema/merchant.ts says what each holds), posted in the transaction that makes
 * the state change causing it, under a key of its own business fact, so a duplicate can never post twice.
 *
 * The one rule it keeps: per payment, captured − refunded = what the order keeps of it. Whatever is left to
 * refund of a payment is its revenue balance, read here, the same way by every refund decision.
 */

export interface LedgerPayment {
  userId: string;
  orderId: string;
  /** The payment's id. */
  id: string;
  amountCents: number;
  currency: string;
}

export interface LedgerRefund {
  userId: string;
  orderId: string;
  paymentId: string;
  id: string;
  providerRefundNo: string;
  attempt: number;
  amountCents: number;
  currency: string;
}

interface Transfer {
  userId: string;
  orderId: string;
  paymentId: string;
  refundId?: string;
  factKey: string;
  from: LedgerAccount;
  to: LedgerAccount;
  amountCents: number;
  currency: string;
}

/** Posts one transfer once: a second post of the same fact changes nothing. */
async function post(tx: Tx, transfer: Transfer): Promise<boolean> {
  const { userId, orderId, paymentId, refundId, factKey, from, to, amountCents, currency } = transfer;
  const posted = await clientOf(tx)`
    INSERT INTO ledger_transfer (user_id, order_id, payment_id, refund_id, fact_key, from_account, to_account,
                                 amount_cents, currency)
    VALUES (${userId}, ${orderId}, ${paymentId}, ${refundId ?? null}, ${factKey}, ${from}, ${to}, ${amountCents},
            ${currency})
    ON CONFLICT (user_id, fact_key) DO NOTHING
    RETURNING id`;
  return posted.length > 0;
}

/** The provider took the shopper's money for this payment (the order's, or a late one to be sent back). */
export function postCapture(tx: Tx, payment: LedgerPayment, transactionId: string) {
  return post(tx, {
    userId: payment.userId,
    orderId: payment.orderId,
    paymentId: payment.id,
    factKey: `capture:${transactionId}`,
    from: "shopper",
    to: "revenue",
    amountCents: payment.amountCents,
    currency: payment.currency,
  });
}

/**
 * Where a refund's amount sits in each of its states: owed (sent or about to be), back with the shopper, or
 * still the order's (rejected, or superseded: it returns nothing).
 */
export const REFUND_POSITION: Record<RefundStatus, LedgerAccount> = {
  // A return is owed once asked for (nothing else may take its room), paid once the goods are back.
  REFUND_AWAITING_GOODS: "refunds_payable",
  REFUND_CREATED: "refunds_payable",
  REFUND_PROCESSING: "refunds_payable",
  REFUND_SUCCESS: "shopper",
  REFUND_FAILED: "revenue",
  REFUND_SUPERSEDED: "revenue",
  REFUND_CANCELLED: "revenue",
};

const FACT_OF: Record<LedgerAccount, string> = { refunds_payable: "owed", shopper: "paid", revenue: "kept" };

/**
 * A refund moved from one status to another: its amount moves between the accounts the two statuses put it
 * in (none when they are the same). Keyed by the refund, its attempt and where the money went; the money
 * reaches the shopper once per refund, whatever the attempt.
 */
export function postRefundMove(tx: Tx, refund: LedgerRefund, from: RefundStatus | "NEW", to: RefundStatus) {
  const source: LedgerAccount = from === "NEW" ? "revenue" : REFUND_POSITION[from];
  const target = REFUND_POSITION[to];
  if (source === target) return Promise.resolve(false);
  const fact = FACT_OF[target];
  return post(tx, {
    userId: refund.userId,
    orderId: refund.orderId,
    paymentId: refund.paymentId,
    refundId: refund.id,
    factKey:
      target === "shopper"
        ? `refund:${refund.providerRefundNo}:${fact}`
        : `refund:${refund.providerRefundNo}:${refund.attempt}:${fact}`,
    from: source,
    to: target,
    amountCents: refund.amountCents,
    currency: refund.currency,
  });
}

export type Balances = Record<LedgerAccount, number>;

/** A payment's balances (money in less money out, per account); all zero before anything was posted. */
export async function paymentBalances(
  db: Executor,
  payment: { userId: string; id: string },
): Promise<Balances> {
  const rows = await db.execute<{ account: LedgerAccount; balance: string }>(sql`
    SELECT account, sum(amount)::bigint AS balance FROM (
      SELECT to_account AS account, amount_cents AS amount FROM ledger_transfer
       WHERE user_id = ${payment.userId} AND payment_id = ${payment.id}
      UNION ALL
      SELECT from_account, -amount_cents FROM ledger_transfer
       WHERE user_id = ${payment.userId} AND payment_id = ${payment.id}) moves
     GROUP BY account`);
  const balances: Balances = { shopper: 0, revenue: 0, refunds_payable: 0 };
  for (const row of rows) balances[row.account] = Number(row.balance);
  return balances;
}

/** What can still be refunded of a payment: what the order keeps of it (captured less refunds owed or made). */
export async function refundableOf(db: Executor, payment: { userId: string; id: string }): Promise<number> {
  return (await paymentBalances(db, payment)).revenue;
}

export interface OrderLedger {
  /** Per payment, its balances (payments with no transfer are left out). */
  payments: { paymentId: string; outTradeNo: string; status: string; currency: string; balances: Balances }[];
  /** The order's transfers, oldest first. */
  transfers: (typeof ledgerTransfer.$inferSelect)[];
}

/** An order's ledger: its transfers and each payment's balances (the admin's order page, the shopper's words). */
export async function orderLedger(
  db: Executor,
  order: { userId: string; orderId: string },
): Promise<OrderLedger> {
  const transfers = await db
    .select()
    .from(ledgerTransfer)
    .where(sql`${ledgerTransfer.userId} = ${order.userId} AND ${ledgerTransfer.orderId} = ${order.orderId}`)
    .orderBy(ledgerTransfer.createdAt, ledgerTransfer.id);
  const payments = await db.execute<{
    id: string;
    out_trade_no: string;
    status: string;
    currency: string;
  }>(sql`
    SELECT id, out_trade_no, status, currency FROM payment_order
     WHERE user_id = ${order.userId} AND order_id = ${order.orderId} ORDER BY created_at`);
  return {
    transfers,
    payments: payments
      .map((payment) => {
        const balances: Balances = { shopper: 0, revenue: 0, refunds_payable: 0 };
        for (const t of transfers.filter((transfer) => transfer.paymentId === payment.id)) {
          balances[t.fromAccount] -= t.amountCents;
          balances[t.toAccount] += t.amountCents;
        }
        return {
          paymentId: payment.id,
          outTradeNo: payment.out_trade_no,
          status: payment.status,
          currency: payment.currency,
          balances,
        };
      })
      .filter((payment) => transfers.some((t) => t.paymentId === payment.paymentId)),
  };
}

/** Where an order's money is, summed over its payments (the shopper's order page says it in words). */
export interface OrderMoney {
  currency: string;
  /** Everything the provider took for the order (late payments too). */
  paidCents: number;
  /** Back with the shopper: refunds the provider confirmed. */
  backCents: number;
  /** Refunds sent, not yet confirmed. */
  onItsWayCents: number;
  /** What the order keeps. */
  keptCents: number;
  /** What the shopper can still ask back: what the order keeps of its one successful payment. */
  refundableCents: number;
}

export function moneyOf(ledger: OrderLedger, currency: string): OrderMoney {
  const sum = (pick: (payment: OrderLedger["payments"][number]) => number) =>
    ledger.payments.reduce((total, payment) => total + pick(payment), 0);
  return {
    currency,
    paidCents: ledger.transfers
      .filter((t) => t.fromAccount === "shopper")
      .reduce((total, t) => total + t.amountCents, 0),
    backCents: ledger.transfers
      .filter((t) => t.toAccount === "shopper")
      .reduce((total, t) => total + t.amountCents, 0),
    onItsWayCents: sum((p) => p.balances.refunds_payable),
    keptCents: sum((p) => p.balances.revenue),
    refundableCents: sum((p) => (p.status === "SUCCESS" ? p.balances.revenue : 0)),
  };
}
