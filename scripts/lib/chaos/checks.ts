import type { Db } from "~/server/db/client";
import { reconcile } from "~/server/reconciliation/reconcile";
import { ChaosClient, sleep } from "./client";
import { CHAOS_PAYMENT_TIMEOUT_S, type Cluster } from "./cluster";
import type { History } from "./history";
import type { Faults, Invariants } from "./report";
import { Rng } from "./rng";
import type { ShopperRecord } from "./shopper";

/** Work the system still owes itself: unrelayed events, queued or locked jobs, unfinished refunds and deliveries. */
export async function outstanding(db: Db) {
  const [row] = await db.$client<Record<string, number>[]>`
    SELECT (SELECT count(*)::int FROM outbox_event WHERE published_at IS NULL) AS unpublished_events,
           (SELECT count(*)::int FROM graphile_worker._private_jobs) AS queued_jobs,
           (SELECT count(*)::int FROM refund_order WHERE status IN ('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING')) AS open_refunds,
           (SELECT count(*)::int FROM refund_order WHERE status = 'REFUND_FAILED') AS refunds_awaiting_the_operator,
           (SELECT count(*)::int FROM orders WHERE status = 'PENDING_PAYMENT') AS orders_awaiting_payment_or_timeout,
           (SELECT count(*)::int FROM orders WHERE status IN ('PAID', 'STOCK_SHORT')) AS unfulfilled_orders,
           (SELECT count(*)::int FROM payment_order p JOIN provider_trade t ON t.out_trade_no = p.out_trade_no
             WHERE p.status NOT IN ('SUCCESS', 'PAID_LATE') AND t.status = 'PAID') AS payments_not_yet_known`;
  return row ?? {};
}

/**
 * What the database says when the system did not settle: who is connected doing
 * what (and waiting on what), and how the queued jobs stand. Printed with the
 * failure so a hang on CI can be read afterwards.
 */
export async function stallReport(db: Db): Promise<string[]> {
  const sessions = await db.$client<Record<string, unknown>[]>`
    SELECT coalesce(nullif(application_name, ''), backend_type) AS app, state, wait_event_type, wait_event,
           count(*)::int AS n, max(now() - state_change)::text AS longest, left(max(query), 120) AS query
      FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid()
     GROUP BY 1, 2, 3, 4 ORDER BY n DESC`;
  const jobs = await db.$client<Record<string, unknown>[]>`
    SELECT j.locked_by IS NOT NULL AS locked, j.attempts, j.run_at <= now() AS due, count(*)::int AS n,
           left(max(j.last_error), 160) AS last_error, max(now() - j.locked_at)::text AS locked_for
      FROM graphile_worker._private_jobs j GROUP BY 1, 2, 3 ORDER BY n DESC`;
  const beats = await db.$client<Record<string, unknown>[]>`
    SELECT worker_id, process, (now() - beat_at)::text AS since FROM worker_heartbeat ORDER BY beat_at DESC LIMIT 5`;
  return [
    ...sessions.map((row) => `session ${JSON.stringify(row)}`),
    ...jobs.map((row) => `jobs ${JSON.stringify(row)}`),
    ...beats.map((row) => `heartbeat ${JSON.stringify(row)}`),
  ];
}

/** Waits until nothing is outstanding (a quiet second in a row), or the timeout. */
export async function settle(db: Db, timeoutMs: number) {
  const started = Date.now();
  let quietSince: number | undefined;
  let last: Record<string, number> = {};
  while (Date.now() - started < timeoutMs) {
    try {
      last = await outstanding(db);
    } catch {
      // a dropped connection: ask again
      await sleep(200);
      continue;
    }
    const busy = Object.values(last).some((n) => n > 0);
    if (!busy) {
      quietSince ??= Date.now();
      if (Date.now() - quietSince >= 1_000)
        return { ok: true, seconds: (Date.now() - started) / 1000, detail: "" };
    } else quietSince = undefined;
    await sleep(250);
  }
  const detail = Object.entries(last)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${n} ${k.replaceAll("_", " ")}`)
    .join(", ");
  return { ok: false, seconds: (Date.now() - started) / 1000, detail };
}

/** Business refusals a key may be answered with (stored, replayed): never mixed with a success. */
const FINAL_REFUSALS = new Set(["OUT_OF_STOCK", "SKU_NOT_FOUND", "INVALID_INPUT", "ORDER_NOT_PAYABLE"]);

/**
 * What must hold after the storm: the database's own invariants (reconciliation),
 * and every shopper's story — one order per intent, one answer per key, paid
 * once, fulfilled or refunded, each refund once.
 */
export async function checkInvariants(
  db: Db,
  records: ShopperRecord[],
  invariants: Invariants,
): Promise<void> {
  // Settled: nothing may be in flight any more, so no grace period.
  const report = await reconcile(db, { lagSeconds: 0, paymentTimeoutS: CHAOS_PAYMENT_TIMEOUT_S });
  for (const invariant of report.invariants) {
    invariants.check(
      `reconciliation: ${invariant.description}`,
      1,
      invariant.violations.map((v) => `${v.message}: ${JSON.stringify(v.rows.slice(0, 3))}`),
    );
  }

  const sql = db.$client;
  // Money that arrived for a payment that could no longer be the order's (crossed notifications, then a
  // close or the timeout): one automatic refund of all of it, succeeded. Reconciliation's "every payment the
  // provider took …" already checks this in sum; here each one is counted and named, for the run's figures.
  const late = await sql<{ out_trade_no: string; refunds: string; order_status: string }[]>`
    SELECT p.out_trade_no, o.status AS order_status,
           coalesce((SELECT string_agg(r.status || ':' || r.amount_cents || '/' || p.amount_cents, ',')
                       FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id), '') AS refunds
      FROM payment_order p JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id WHERE p.status = 'PAID_LATE'`;
  invariants.check(
    "money paid for a payment that was no longer the order's went back once, in full (late payments)",
    late.length,
    late
      .filter((p) => !/^REFUND_SUCCESS:(\d+)\/\1$/.test(p.refunds))
      .map((p) => `${p.out_trade_no} (order ${p.order_status}): refunds ${p.refunds || "none"}`),
  );
  // Issue 24's first defect: a late payment, then the order paid by another payment ran short of stock. Both
  // payments go back in full: the late one by its own refund, the paying one by the automatic refund.
  const lateThenShort = await sql<{ order_id: string; status: string; payments: string }[]>`
    SELECT o.id AS order_id, o.status,
           (SELECT string_agg(p.status || ' ' || p.amount_cents || ' back ' ||
                              coalesce((SELECT sum(r.amount_cents) FROM refund_order r
                                         WHERE r.user_id = p.user_id AND r.payment_id = p.id AND r.status = 'REFUND_SUCCESS'), 0), ', ')
              FROM payment_order p WHERE p.user_id = o.user_id AND p.order_id = o.id
               AND p.status IN ('SUCCESS', 'PAID_LATE')) AS payments
      FROM orders o
     WHERE EXISTS (SELECT 1 FROM payment_order p WHERE p.user_id = o.user_id AND p.order_id = o.id AND p.status = 'PAID_LATE')
       AND EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = o.user_id AND r.order_id = o.id AND r.refund_no LIKE 'sys/auto/%')`;
  invariants.check(
    "a late payment, then the order paid again ran short of stock: both payments went back in full",
    lateThenShort.length,
    lateThenShort
      .filter(
        (o) => o.status !== "REFUNDED" || !o.payments.split(", ").every((p) => /^\S+ (\d+) back \1$/.test(p)),
      )
      .map((o) => `order ${o.order_id} is ${o.status}: ${o.payments}`),
  );
  const orders = await sql<
    {
      user_id: string;
      request_id: string;
      id: string;
      status: string;
      discount_cents: number;
      open_s: number;
    }[]
  >`SELECT user_id, request_id, id, status, discount_cents,
           extract(epoch FROM updated_at - created_at)::float8 AS open_s FROM orders`;
  const byIntent = new Map<
    string,
    { id: string; status: string; discount_cents: number; open_s: number }[]
  >();
  for (const o of orders) {
    const key = `${o.user_id}/${o.request_id}`;
    byIntent.set(key, [...(byIntent.get(key) ?? []), o]);
  }
  const paymentsByOrder = new Map<string, number>();
  for (const p of await sql<{ order_id: string; n: number }[]>`
      SELECT order_id, count(*)::int AS n FROM payment_order WHERE status = 'SUCCESS' GROUP BY order_id`) {
    paymentsByOrder.set(p.order_id, p.n);
  }
  const refunds = new Map<string, { n: number; status: string; amount: number }>();
  // Refund numbers are each shopper's own.
  for (const r of await sql<
    { user_id: string; refund_no: string; n: number; status: string; amount: number }[]
  >`
      SELECT user_id, refund_no, count(*)::int AS n, max(status) AS status, max(amount_cents)::int AS amount
        FROM refund_order GROUP BY user_id, refund_no`) {
    refunds.set(`${r.user_id}/${r.refund_no}`, r);
  }

  // What each paid order has been refunded (every refund that did not fail), and what it cost.
  // `paid` less the value of the coupon the order earned if that coupon was spent: a shopper's refund may not
  // take it (its value stays with the order that earned it), so asking for more is rightly refused.
  const refundedByOrder = new Map<string, { paid: number; refunded: number }>();
  for (const o of await sql<{ order_id: string; paid: number; refunded: number }[]>`
      SELECT p.order_id,
             (p.amount_cents - coalesce((SELECT g.amount FROM benefit_grant g
                                           WHERE g.user_id = p.user_id AND g.order_id = p.order_id AND g.benefit_type = 'COUPON'
                                             AND EXISTS (SELECT 1 FROM coupon_redemption c WHERE c.user_id = g.user_id AND c.code = g.code)), 0))::int AS paid,
             coalesce((SELECT sum(r.amount_cents) FROM refund_order r
                        WHERE r.user_id = p.user_id AND r.payment_id = p.id AND r.status NOT IN ('REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED')), 0)::int AS refunded
        FROM payment_order p WHERE p.status = 'SUCCESS'`) {
    refundedByOrder.set(o.order_id, o);
  }

  // What one unit of each order line was paid: its price less its share of the order's discount, rounded down.
  const linePrices = new Map<string, number>();
  for (const l of await sql<{ order_id: string; sku_id: string; paid: number }[]>`
      SELECT i.order_id, i.sku_id,
             floor(i.unit_price_cents::numeric * o.amount_cents / (o.amount_cents + o.discount_cents))::int AS paid
        FROM order_item i JOIN orders o ON o.user_id = i.user_id AND o.id = i.order_id
       WHERE o.amount_cents + o.discount_cents > 0`) {
    linePrices.set(`${l.order_id}/${l.sku_id}`, l.paid);
  }
  const gaveUp: string[] = [];
  const oneOrder: string[] = [];
  const oneAnswer: string[] = [];
  const paidOnce: string[] = [];
  const finished: string[] = [];
  const sawPaid: string[] = [];
  const refundOnce: string[] = [];
  const cancelRaces: string[] = [];
  let racesChecked = 0;
  const timedOut: string[] = [];
  let timeoutsChecked = 0;
  const afterClose: string[] = [];
  let closesChecked = 0;
  const crossed: string[] = [];
  let crossedChecked = 0;
  const moneyTaken = new Map<string, number>();
  for (const p of await sql<{ order_id: string; n: number }[]>`
      SELECT order_id, count(*)::int AS n FROM payment_order WHERE status IN ('SUCCESS', 'PAID_LATE') GROUP BY order_id`) {
    moneyTaken.set(p.order_id, p.n);
  }
  const internal: string[] = [];
  let paidShoppers = 0;
  let refundsChecked = 0;
  for (const r of records) {
    const who = `shopper ${r.index}`;
    if (r.gaveUp) gaveUp.push(`${who}: ${r.gaveUp}`);
    for (const error of r.internalErrors) internal.push(`${who}: ${error}`);
    for (const change of r.sessionChanges) internal.push(`${who}: ${change}`);
    const stored = byIntent.get(`${r.userId}/${r.requestId}`) ?? [];
    const refused = r.refusals.filter((code) => FINAL_REFUSALS.has(code));
    const expected = r.orderIds.length > 0 ? 1 : 0;
    if (stored.length !== expected && !(r.gaveUp && stored.length <= 1)) {
      oneOrder.push(
        `${who}: ${stored.length} orders for request id ${r.requestId} (answers named ${r.orderIds.length})`,
      );
    }
    const named = new Set(r.orderIds);
    if (named.size > 1 || (named.size === 1 && stored[0] && !named.has(stored[0].id))) {
      oneAnswer.push(`${who}: answers named orders ${[...named].join(", ")}, database has ${stored[0]?.id}`);
    }
    if (new Set(r.outTradeNos).size > 1)
      oneAnswer.push(`${who}: pay answers named ${r.outTradeNos.join(", ")}`);
    if (refused.length > 0 && r.orderIds.length > 0 && refused.includes("OUT_OF_STOCK")) {
      oneAnswer.push(`${who}: the same key was answered with an order and with OUT_OF_STOCK`);
    }
    const order = stored[0];
    if (r.paid && order) {
      paidShoppers++;
      const n = paymentsByOrder.get(order.id) ?? 0;
      if (n !== 1) paidOnce.push(`${who}: order ${order.id} has ${n} successful payments`);
      if (!["SHIPPED", "REFUNDED"].includes(order.status)) {
        const money = refundedByOrder.get(order.id);
        const refunded = money ? `; refunds not failed: ${money.refunded} of ${money.paid} cents` : "";
        finished.push(
          `${who}: order ${order.id} is ${order.status}, neither shipped nor refunded${refunded}`,
        );
      }
      if (!r.lastStatus || !["PAID", "SHIPPED", "STOCK_SHORT", "REFUNDED"].includes(r.lastStatus)) {
        sawPaid.push(`${who}: watched the order page for 60 s and saw ${r.lastStatus ?? "nothing"}`);
      }
    }
    if (r.cancelRace && order) {
      racesChecked++;
      const { answer, finalStatus } = r.cancelRace;
      const payments = paymentsByOrder.get(order.id) ?? 0;
      // Exactly one of two worlds: closed with no money taken (the Confirm found the trade closed), or paid
      // and the cancel refused (ORDER_NOT_CANCELLABLE). Never closed with a payment nobody refunds.
      const closed =
        answer === "CLOSED" && finalStatus === "CLOSED" && order.status === "CLOSED" && payments === 0;
      const paid = answer === "ORDER_NOT_CANCELLABLE" && order.status !== "CLOSED" && payments === 1;
      if (!closed && !paid) {
        cancelRaces.push(
          `${who}: cancel answered ${answer}, the order is ${order.status} (seen ${finalStatus}) with ${payments} successful payments`,
        );
      }
    }
    if (r.cancelAfterCrossedClose && order) {
      crossedChecked++;
      const { answer, finalStatus } = r.cancelAfterCrossedClose;
      // The cancel won: the order closed, and the money MockPay took is a late payment's (refunded in full,
      // which late-payments-refunded checks). Or the success won: the order paid, the cancel refused. Never a
      // closed order whose payment succeeded.
      const payments = paymentsByOrder.get(order.id) ?? 0;
      const taken = moneyTaken.get(order.id) ?? 0;
      const closed = answer === "CLOSED" && order.status === "CLOSED" && payments === 0 && taken === 1;
      const paid = answer === "ORDER_NOT_CANCELLABLE" && order.status !== "CLOSED" && payments === 1;
      if (!closed && !paid) {
        crossed.push(
          `${who}: cancel answered ${answer}, the order is ${order.status} (seen ${finalStatus}) with ${payments} successful payments, ${taken} that took money`,
        );
      }
    }
    if ((r.leftUnpaid || r.tooSlow) && order && !r.confirmedAfterClose) {
      timeoutsChecked++;
      // Closed by the timeout job, never before the deadline; money that still arrived went back (reconciliation).
      if (order.status !== "CLOSED" || order.open_s < CHAOS_PAYMENT_TIMEOUT_S - 1) {
        timedOut.push(
          `${who}: order ${order.id} left unpaid is ${order.status} after ${order.open_s.toFixed(1)} s (timeout ${CHAOS_PAYMENT_TIMEOUT_S} s)`,
        );
      }
    }
    if (r.confirmedAfterClose && order) {
      closesChecked++;
      // Cancelled before the Confirm: the trade was closed at MockPay first, so the Confirm took nothing.
      const taken = moneyTaken.get(order.id) ?? 0;
      if (r.confirmedAfterClose.cancelAnswer !== "CLOSED" || order.status !== "CLOSED" || taken !== 0) {
        afterClose.push(
          `${who}: cancel answered ${r.confirmedAfterClose.cancelAnswer}, the order is ${order.status}, ${taken} payments took money`,
        );
      }
    }
    for (const refund of r.refunds) {
      refundsChecked++;
      const row = refunds.get(`${r.userId}/${refund.refundNo}`);
      const money = order ? refundedByOrder.get(order.id) : undefined;
      // A return's price is what its lines were paid (their share of a coupon's discount taken off).
      const line = refund.lines?.[0];
      const asked = line && order ? (linePrices.get(`${order.id}/${line.skuId}`) ?? 0) : refund.amountCents;
      const refusedRightly =
        !row &&
        refund.statuses.length === 0 &&
        refund.refusals.every((code) => code === "REFUND_EXCEEDS_PAID") &&
        // e.g. the order could not be filled and was refunded in full automatically meanwhile
        money !== undefined &&
        money.refunded + asked > money.paid;
      if (refusedRightly) continue;
      if (row?.n !== 1) {
        refundOnce.push(
          `${who}: ${row?.n ?? 0} refunds for refund_no ${refund.refundNo} for order ${stored[0]?.id} of ${r.userId} (answers: ${[...refund.statuses, ...refund.refusals].join(", ") || "none"})`,
        );
      } else if (
        // Rejected at MockPay, then other refunds (the automatic one for an order short of stock) returned
        // the money: nothing is left for it, and reconciliation checks that it truly has no room.
        !(
          row.status === "REFUND_SUPERSEDED" &&
          money !== undefined &&
          money.refunded + row.amount > money.paid
        ) &&
        (row.status !== "REFUND_SUCCESS" || row.amount !== refund.amountCents)
      ) {
        refundOnce.push(
          `${who}: refund ${refund.refundNo} is ${row.status} for ${row.amount} (asked ${refund.amountCents})`,
        );
      }
      if (refund.refusals.length > 0 && refund.statuses.length > 0) {
        refundOnce.push(
          `${who}: refund ${refund.refundNo} answered both ${refund.statuses[0]} and ${refund.refusals[0]}`,
        );
      }
    }
  }
  const intents = records.length;
  invariants.check("every shopper got a final answer (no give-up)", intents, gaveUp);
  invariants.check("one order per checkout intent, none for a refused one", intents, oneOrder);
  invariants.check("every answer for one key names the same order / payment", intents, oneAnswer);
  invariants.check("a paid order has exactly one successful payment", paidShoppers, paidOnce);
  invariants.check("every paid order ends shipped or refunded", paidShoppers, finished);
  invariants.check("the shopper saw the payment land (notifications or status query)", paidShoppers, sawPaid);
  invariants.check(
    "each refund request made one refund, for its amount, and it succeeded",
    refundsChecked,
    refundOnce,
  );
  invariants.check(
    "a cancel racing Confirm ends closed with no money taken, or paid with the cancel refused",
    racesChecked,
    cancelRaces,
  );
  invariants.check(
    `every order left unpaid is closed by the timeout (${CHAOS_PAYMENT_TIMEOUT_S} s), never before it`,
    timeoutsChecked,
    timedOut,
  );
  invariants.check(
    "Confirm on a cancelled order's pay page took no money (the trade was closed first)",
    closesChecked,
    afterClose,
  );
  invariants.check(
    "a cancel racing a success whose payment a crossed close had closed here ends closed with the money a late payment's, or paid with the cancel refused",
    crossedChecked,
    crossed,
  );
  invariants.check(
    "one coupon spent by two orders at once over both instances: never held by both; one discounted order, the other refused (or placed after the first ended unpaid and gave the coupon back)",
    ...(await checkCouponSpends(db, records)),
  );
  invariants.check("no internal error (5xx other than 503) answered, no session lost", intents, internal);
}

/**
 * Two orders spending one coupon at once: the coupon is never held by both. Either one took it and the
 * other was refused (COUPON_ALREADY_USED, no order; COUPON_NOT_APPLICABLE if the coupon was revoked in
 * between), or the coupon was revoked before either took it (both refused, nothing placed), or — when
 * the second was held up past the first
 * order's payment timeout (its claim's holder was killed, and the retry waited out the lease) — the
 * first ended unpaid and released the coupon *before* the second took it, and both were discounted.
 */
export async function checkCouponSpends(
  db: Db,
  records: Pick<ShopperRecord, "index" | "userId" | "couponSpend">[],
): Promise<[number, string[]]> {
  const spends = records.flatMap((r) => (r.couponSpend ? [{ ...r, spend: r.couponSpend }] : []));
  const rows = await db.$client<
    {
      user_id: string;
      request_id: string;
      id: string;
      status: string;
      discount_cents: number;
      redemption: string | null;
      taken_ms: number | null;
      released_ms: number | null;
    }[]
  >`SELECT o.user_id, o.request_id, o.id, o.status, o.discount_cents, r.status AS redemption,
           extract(epoch FROM r.created_at)::float8 * 1000 AS taken_ms,
           extract(epoch FROM r.released_at)::float8 * 1000 AS released_ms
      FROM orders o LEFT JOIN coupon_redemption r ON r.user_id = o.user_id AND r.order_id = o.id
     WHERE (o.user_id, o.request_id) IN (SELECT * FROM unnest(
             ${spends.flatMap((s) => s.spend.requestIds.map(() => s.userId))}::text[],
             ${spends.flatMap((s) => s.spend.requestIds)}::text[]))`;
  // Coupons revoked since (the order that earned one was refunded in full, e.g. automatically after
  // STOCK_SHORT): an order spending one then is refused COUPON_NOT_APPLICABLE, not COUPON_ALREADY_USED.
  const revoked = new Set(
    (
      await db.$client<{ code: string }[]>`
        SELECT g.code FROM benefit_grant g
          JOIN benefit_reversal v ON v.user_id = g.user_id AND v.order_id = g.order_id AND v.benefit_type = 'COUPON'
         WHERE g.benefit_type = 'COUPON' AND g.code IS NOT NULL`
    ).map((r) => r.code),
  );
  const problems: string[] = [];
  for (const { index, userId, spend } of spends) {
    const placed = spend.requestIds.flatMap((id) =>
      rows.filter((o) => o.user_id === userId && o.request_id === id),
    );
    const discounted = placed.filter((o) => o.discount_cents > 0);
    const isRevoked = revoked.has(spend.code);
    const refused = spend.answers.filter(
      (a) => a === "COUPON_ALREADY_USED" || (isRevoked && a === "COUPON_NOT_APPLICABLE"),
    ).length;
    const describe = `${discounted.length} discounted, ${placed.length} placed (answers: ${spend.answers.join(", ")}${isRevoked ? "; coupon revoked since" : ""})`;
    if (placed.length === 1 && discounted.length === 1 && refused === 1) continue;
    // Revoked before either order could take it: both refused, nothing placed.
    if (isRevoked && placed.length === 0 && spend.answers.every((a) => a === "COUPON_NOT_APPLICABLE"))
      continue;
    const [first, second] = [...discounted].sort((a, b) => (a.taken_ms ?? 0) - (b.taken_ms ?? 0));
    const oneAfterTheOther =
      placed.length === 2 &&
      refused === 0 &&
      first?.redemption === "RELEASED" &&
      first.status === "CLOSED" &&
      second?.taken_ms != null &&
      first.released_ms != null &&
      first.released_ms <= second.taken_ms;
    if (!oneAfterTheOther) {
      problems.push(`shopper ${index}: coupon ${spend.code} on two orders at once: ${describe}`);
    }
  }
  return [spends.length, problems];
}

/** An order whose creation was answered (a shopper's or a prober's): checked again once the run is over. */
export interface AcknowledgedOrder {
  label: string;
  /** The session cookie it was placed with. */
  session: string;
  requestId: string;
  items: { skuId: string; quantity: number }[];
  orderIds: string[];
}

/**
 * Once the run is over (every failover, kill and drop behind it), each acknowledged order must be in the
 * database, and its request, sent again with its key and session, must still name the order it named then. A write the
 * database acknowledged and then lost (an asynchronous standby promoted without it) shows here as a new
 * order made for an old key.
 */
export async function checkAnswersHold(
  db: Db,
  cluster: Cluster,
  acknowledged: AcknowledgedOrder[],
  faults: Faults,
  history?: History,
): Promise<[number, string[]]> {
  const violations: string[] = [];
  // The database first: an instance's replay cache could still answer an order the database lost.
  const ids = acknowledged.map((order) => order.orderIds[0] as string);
  const kept = new Set(
    (await db.$client<{ id: string }[]>`SELECT id FROM orders WHERE id = ANY(${ids}::uuid[])`).map(
      (r) => r.id,
    ),
  );
  for (const order of acknowledged) {
    if (!kept.has(order.orderIds[0] as string))
      violations.push(`${order.label}: acknowledged order ${order.orderIds[0]} is not in the database`);
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async (_, lane) => {
      const client = new ChaosClient(
        cluster,
        Rng.forParticipant(0, lane),
        faults,
        undefined,
        history?.for(`recheck ${lane}`),
      );
      while (next < acknowledged.length) {
        const order = acknowledged[next++] as AcknowledgedOrder;
        const answer = await client
          .resume(order.session)
          .mutate<{ orderId: string }>("orders.create", {
            requestId: order.requestId,
            items: order.items,
          })
          .catch((error: unknown) => ({ ok: false as const, error: String(error) }));
        const named = answer.ok ? answer.value.orderId : JSON.stringify(answer.error).slice(0, 120);
        if (named !== order.orderIds[0]) {
          violations.push(
            `${order.label}: acknowledged order ${order.orderIds[0]}; the same request now answers ${named}`,
          );
        }
      }
    }),
  );
  return [acknowledged.length, violations];
}

/** The shoppers' acknowledged orders, as the check above reads them. */
export function acknowledgedOrders(records: ShopperRecord[]): AcknowledgedOrder[] {
  return records
    .filter((r) => r.orderIds.length > 0 && r.session)
    .map((r) => ({
      label: `shopper ${r.index}`,
      session: r.session,
      requestId: r.requestId,
      items: r.items,
      orderIds: r.orderIds,
    }));
}

/**
 * A run with `--webhooks=standard`: MockPay spoke Standard Webhooks to every endpoint, and the merchant took
 * every delivery it signed (no 401 but for the signatures and timestamps the run spoiled on purpose).
 */
export async function checkStandardWebhooks(db: Db, invariants: Invariants): Promise<void> {
  const sql = db.$client;
  const endpoints = await sql<{ url: string; format: string; status: string }[]>`
    SELECT url, format, status FROM provider_endpoint`;
  const refused = await sql<{ kind: string; http_status: number; n: number }[]>`
    SELECT kind, http_status, count(*)::int AS n FROM provider_delivery_attempt
     WHERE http_status = 401 AND kind NOT IN ('TAMPERED_SIGNATURE', 'STALE_TIMESTAMP')
     GROUP BY kind, http_status`;
  const [acknowledged] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM provider_delivery_attempt WHERE ok AND http_status BETWEEN 200 AND 299`;
  invariants.check(
    "MockPay sent as Standard Webhooks (v1) to every endpoint, and the merchant verified every delivery it signed",
    endpoints.length + (acknowledged?.n ?? 0),
    [
      ...(endpoints.length === 0 ? ["no endpoint at all"] : []),
      ...(acknowledged?.n ? [] : ["no delivery acknowledged"]),
      ...endpoints.filter((e) => e.format !== "standard").map((e) => `${e.url} is ${e.format}`),
      ...refused.map((r) => `${r.n} ${r.kind} deliveries refused (401)`),
    ],
  );
}
