import { clientOf, type Db } from "~/server/db/client";
import { absorbedByUpdate, PAYMENT_MACHINE } from "~/server/db/machines";
import type { NotificationBody } from "~/shared/provider-contract";
import type { ReceivedMeta } from "./notification-timeline";
import { ok, type Verdict } from "./verdict";

/**
 * A provider notification, second phase: copies of one fact take turns in this process, and copies of a
 * success already applied are answered together by one statement.
 */

const PAYMENT = PAYMENT_MACHINE.transitions;

/** One fact, whichever copy carries it: what the provider says happened, to what, for how much. */
export function factKey(n: NotificationBody): string {
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
export async function inTurn<T>(
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
export function alreadyApplied(
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
