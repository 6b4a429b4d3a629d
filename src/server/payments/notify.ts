import { and, eq, inArray, sql } from "drizzle-orm";
import { clientOf, type Db, type Tx } from "~/server/db/client";
import { absorbedByUpdate, ORDER_MACHINE, onlyFrom, PAYMENT_MACHINE } from "~/server/db/machines";
import { paymentOrder } from "~/server/db/schema";
import { postCapture } from "~/server/ledger/ledger";
import type { Observer } from "~/server/observability/observer";
import { violatedConstraint } from "~/shared/postgres-driver";
import {
  DELIVERY_ID_HEADER,
  MERCHANT_SUCCESS_BODY,
  type NotificationBody,
  notificationBodySchema,
  SIGNATURE_HEADER,
  verifyBodySignature,
} from "~/shared/provider-contract";
import type { TransactionSteps } from "~/shared/transaction-steps";
import type { RefundsPort } from "./refunds-port";
import type { RefusalTally } from "./refused-notifications";
import {
  type StandardWebhookHeaders,
  type StandardWebhookKeys,
  verifyStandardWebhook,
} from "./standard-webhooks";
import { ok, refuse, type Verdict } from "./verdict";

export interface NotifyDeps {
  webhookSecret: string;
  /** What deliveries signed as Standard Webhooks are checked with (none: they are refused as unsigned). */
  standardWebhooks?: StandardWebhookKeys;
  appId: string;
  toleranceS: number;
  now?: () => Date;
  observer?: Observer;
  /** Where notifications that fail verification are counted (see ./refused-notifications.ts). */
  refusals?: RefusalTally;
  /** Where refund facts, and refunds owed, go (./refunds-port.ts). */
  refunds: RefundsPort;
}

export interface RawNotification {
  body: string;
  signature: string | null;
  deliveryId: string | null;
  /** The delivery's Standard Webhooks headers, when it carries `webhook-id`: checked instead of `signature`. */
  standard?: StandardWebhookHeaders;
}

/**
 * A delivery as it arrived, from its body and headers. One signed as Standard Webhooks names itself by
 * `webhook-id` (the same on every attempt, and what it is deduped by) and is checked that way; any other by
 * the provider's own signature header and delivery id.
 */
export function rawNotification(body: string, header: (name: string) => string | null): RawNotification {
  const signature = header(SIGNATURE_HEADER);
  const webhookId = header("webhook-id");
  if (!webhookId) return { body, signature, deliveryId: header(DELIVERY_ID_HEADER) };
  return {
    body,
    signature,
    deliveryId: webhookId,
    standard: {
      id: webhookId,
      timestamp: header("webhook-timestamp"),
      signature: header("webhook-signature"),
    },
  };
}

export interface NotifyAnswer {
  httpStatus: number;
  body: { code: "SUCCESS" | "FAIL"; message?: string };
}

/**
 * The merchant's side of a provider notification. Checks, in order: signature
 * and timestamp, app id, payment exists, amount and currency; then applies the
 * fact with conditional updates, so any number of copies, in any order and at
 * the same moment, change the state once. Every verified notification is
 * recorded with its outcome; one that fails verification is only counted. A 200
 * tells the provider to stop; anything else, to send again.
 */
export async function handlePaymentNotification(
  db: Db,
  raw: RawNotification,
  deps: NotifyDeps,
): Promise<NotifyAnswer> {
  const nowS = Math.floor((deps.now?.() ?? new Date()).getTime() / 1000);
  const signature = raw.standard
    ? verifyStandardWebhook(raw.standard, raw.body, deps.standardWebhooks ?? { secrets: [], publicKeys: [] })
    : verifyBodySignature("notification", deps.webhookSecret, raw.body, raw.signature, nowS, deps.toleranceS);
  const parsed = parseBody(raw.body);
  const meta: ReceivedMeta = {
    deliveryId: raw.deliveryId?.slice(0, 100) ?? null,
    notificationId: parsed?.id ?? null,
    outTradeNo: parsed?.out_trade_no ?? null,
    type: parsed?.type ?? null,
  };
  const record = async (executor: Db | Tx, verdict: Verdict) => {
    await recordReceived(executor, meta, verdict);
    deps.observer?.notification({ ...meta, outcome: verdict.outcome, alert: verdict.alert ?? false });
    return answer(verdict);
  };

  if (signature !== "OK") {
    // Unverified: anyone could have sent it. Counted, never stored as a fact or tied to a payment.
    const reason = signature === "MALFORMED" ? "UNSIGNED" : signature;
    deps.refusals?.add(reason);
    deps.observer?.notification({
      deliveryId: null,
      notificationId: null,
      outTradeNo: null,
      type: null,
      outcome: reason,
      alert: false,
    });
    return { httpStatus: 401, body: { code: "FAIL", message: `signature check failed: ${reason}` } };
  }
  if (!parsed) return record(db, refuse("MALFORMED", 400, "body is not a valid notification"));
  if (parsed.app_id !== deps.appId)
    return record(db, refuse("WRONG_APP", 400, `unknown app id ${parsed.app_id}`));

  // Copies of one fact that arrive together (providers send two at once) take turns in this process: the
  // first applies it; those that waited for it wake together and are answered by one statement for all of
  // them, instead of each opening a transaction that waits on the first's row lock to learn the same. Only an
  // order of work: every copy still goes through every check below, and copies on other instances meet in the
  // database (the row locks and conditional updates below).
  const known = (found: Verdict | undefined) => {
    if (found) deps.observer?.notification({ ...meta, outcome: found.outcome, alert: false });
    return found && answer(found);
  };
  const fact = factKey(parsed);
  return inTurn(
    fact,
    async () => {
      // Most copies of a success arrive after it was applied: answered by one statement, no transaction.
      const found = known(await alreadyApplied(db, meta, parsed, fact));
      if (found) return found;
      try {
        return await db.transaction(async (tx) => {
          const verdict = await applyProviderFact(tx, parsed, deps.refunds);
          return record(tx, verdict);
        });
      } catch (error) {
        // Two payments took one transaction id at the same moment: the unique index decided; the loser is the clash.
        if (violatedConstraint(error) !== "payment_order_transaction_id_uq") throw error;
        const clash = `transaction ${parsed.transaction_id} was taken by another payment at the same moment`;
        return record(db, refuse("TRANSACTION_CLASH", 409, clash, true));
      }
    },
    async () => known(await alreadyApplied(db, meta, parsed, fact)),
  );
}

/** One fact, whichever copy carries it: what the provider says happened, to what, for how much. */
function factKey(n: NotificationBody): string {
  return JSON.stringify([n.out_trade_no, n.type, n.transaction_id, n.refund_no, n.amount_cents, n.currency]);
}

/** The copy of each fact being handled in this process now, and when it is done. */
const handling = new Map<string, Promise<unknown>>();

/**
 * Runs `alone` once no other copy of the same fact is being handled in this process, or once COPY_WAIT_MS
 * have passed (a slow copy never holds the others up for longer than that). The copies that waited for one
 * wake together and first try `together`: what settles a copy without taking a turn (the fact is applied).
 * If it does not, they take turns again.
 */
async function inTurn<T>(
  key: string,
  alone: () => Promise<T>,
  together: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = performance.now() + COPY_WAIT_MS;
  for (let running = handling.get(key); running; running = handling.get(key)) {
    const left = deadline - performance.now();
    if (left <= 0) break;
    await settledWithin(running, left);
    // Still running (the wait ran out), or another waiter already took the next turn: look again.
    if (handling.has(key)) continue;
    const settled = await together();
    if (settled !== undefined) return settled;
  }
  const mine: Promise<T> = alone().finally(() => {
    if (handling.get(key) === mine) handling.delete(key);
  });
  if (!handling.has(key)) handling.set(key, mine);
  return mine;
}

/** Resolves when `work` settles (either way) or after `ms`, whichever is first. */
async function settledWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  await Promise.race([work.catch(() => {}), late]);
  clearTimeout(timer);
}

const COPY_WAIT_MS = 2_000;

/**
 * A success the merchant already holds — its payment SUCCESS (or PAID_LATE) under this very transaction id,
 * for this amount and currency — is a duplicate whatever else happens: the transaction below would find the
 * same (no transition moves a payment out of those states, nor changes its transaction id) and answer the
 * same DUPLICATE. Recorded and answered in one statement that reads the committed payment; anything else
 * (undecided, another transaction id, a mismatch) is left to the transaction. Copies of one fact that ask in
 * the same turn of the event loop (those that waited for the copy that applied it) share the statement: one
 * row each, all or none of them. `key` is the fact's (factKey).
 */
function alreadyApplied(
  db: Db,
  meta: ReceivedMeta,
  n: NotificationBody,
  key: string,
): Promise<Verdict | undefined> {
  if (n.type !== "payment.succeeded" || !n.transaction_id) return Promise.resolve(undefined);
  let asking = askingOf.get(db);
  if (!asking) {
    asking = new Map();
    askingOf.set(db, asking);
  }
  let copies = asking.get(key);
  if (!copies) {
    const these: AskingCopy[] = [];
    copies = these;
    asking.set(key, these);
    const fromDb = asking;
    setImmediate(() => {
      fromDb.delete(key);
      recordDuplicates(db, n, these).then(
        (verdict) => {
          for (const copy of these) copy.resolve(verdict);
        },
        (error: unknown) => {
          for (const copy of these) copy.reject(error);
        },
      );
    });
  }
  const pending = copies;
  return new Promise((resolve, reject) => pending.push({ meta, resolve, reject }));
}

interface AskingCopy {
  meta: ReceivedMeta;
  resolve: (verdict: Verdict | undefined) => void;
  reject: (error: unknown) => void;
}

/** Per database handle, the copies asking about each fact in this turn of the event loop. */
const askingOf = new WeakMap<Db, Map<string, AskingCopy[]>>();

/** One DUPLICATE row per copy when the payment already holds this success; none otherwise. */
async function recordDuplicates(
  db: Db,
  n: NotificationBody,
  copies: AskingCopy[],
): Promise<Verdict | undefined> {
  const detail = (status: "SUCCESS" | "PAID_LATE") =>
    absorbedByUpdate(PAYMENT_MACHINE, PAYMENT.succeed, status);
  const recorded = await clientOf(db)<{ detail: string }[]>`
    INSERT INTO payment_notification (notification_id, delivery_id, out_trade_no, type, outcome, detail, alert, http_status)
    SELECT copy.notification_id, copy.delivery_id, ${n.out_trade_no}, ${n.type}, 'DUPLICATE',
           CASE p.status WHEN 'SUCCESS' THEN ${detail("SUCCESS")} ELSE ${detail("PAID_LATE")} END, false, 200
      FROM payment_order p,
           unnest(${copies.map((c) => c.meta.notificationId)}::text[],
                  ${copies.map((c) => c.meta.deliveryId)}::text[]) WITH ORDINALITY AS copy(notification_id, delivery_id, n)
     WHERE p.out_trade_no = ${n.out_trade_no} AND p.status IN ('SUCCESS', 'PAID_LATE')
       AND p.transaction_id = ${n.transaction_id} AND p.amount_cents = ${n.amount_cents}::int8
       AND p.currency = ${n.currency}
     ORDER BY copy.n
    RETURNING detail`;
  const [first] = recorded;
  return first ? ok("DUPLICATE", first.detail) : undefined;
}

export interface ReceivedMeta {
  deliveryId: string | null;
  notificationId: string | null;
  outTradeNo: string | null;
  type: string | null;
}

/** The payment timeline: every fact the merchant heard, and what it did with it. */
export async function recordReceived(executor: Db | Tx, meta: ReceivedMeta, verdict: Verdict): Promise<void> {
  await clientOf(executor)`
    INSERT INTO payment_notification (notification_id, delivery_id, out_trade_no, type, outcome, detail, alert, http_status)
    VALUES (${meta.notificationId}, ${meta.deliveryId}, ${meta.outTradeNo}, ${meta.type}, ${verdict.outcome},
            ${verdict.detail}, ${verdict.alert ?? false}, ${verdict.httpStatus})`;
}

function parseBody(body: string): NotificationBody | null {
  try {
    const result = notificationBodySchema.safeParse(JSON.parse(body));
    return result.success ? result.data : null;
  } catch {
    return null;
  }
}

function answer(verdict: Verdict): NotifyAnswer {
  return verdict.httpStatus === 200
    ? { httpStatus: 200, body: MERCHANT_SUCCESS_BODY }
    : { httpStatus: verdict.httpStatus, body: { code: "FAIL", message: verdict.detail } };
}

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
