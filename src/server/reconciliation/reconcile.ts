import { type SQL, sql } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { A_LINE_NO_LONGER_FITS } from "~/server/refunds/transitions";

export interface Violation {
  message: string;
  rows: Record<string, unknown>[];
}

export interface InvariantResult {
  name: string;
  description: string;
  violations: Violation[];
}

export interface ReconciliationReport {
  checkedAt: Date;
  ok: boolean;
  invariants: InvariantResult[];
}

export interface ReconcileOptions {
  /** An outbox event unpublished (or a job undone) for longer than this is a violation. */
  lagSeconds?: number;
  /** Rows listed per violation. */
  sampleSize?: number;
  /** ORDER_PAYMENT_TIMEOUT_S: an order unpaid this long (plus the lag) should have been closed. */
  paymentTimeoutS?: number;
}

interface Invariant {
  name: string;
  description: string;
  /** Each query returns the rows that break the rule (none when it holds). */
  checks: { message: string; query: (o: Required<ReconcileOptions>) => SQL }[];
}

/** Orders that took money: their OrderPaid was applied. */
const PAID_STATUSES = sql`('PAID', 'SHIPPED', 'STOCK_SHORT', 'REFUNDED')`;

/** Orders whose named consumer finished with the given event type. */
const consumed = (eventType: string, consumer: string) => sql`
  SELECT e.user_id, e.aggregate_id::uuid AS order_id, c.result FROM outbox_event e
    JOIN message_consume_record c ON c.user_id = e.user_id AND c.event_id = e.id AND c.consumer_name = ${consumer} AND c.status = 'DONE'
   WHERE e.event_type = ${eventType}`;

/** Per (order, SKU) the order took stock of: deducted less returned. */
const HELD_STOCK = sql`
  SELECT d.user_id, d.order_id, d.sku_id, (d.quantity - coalesce((SELECT sum(r.quantity) FROM stock_return_record r
                                                        WHERE r.user_id = d.user_id AND r.order_id = d.order_id AND r.sku_id = d.sku_id), 0))::int AS held
    FROM stock_deduct_record d`;

/** The ledger's balances of the payment `p` (in the query): shopper, revenue, payable. */
const LEDGER_OF_PAYMENT = sql.raw(
  `SELECT ${(["shopper", "revenue", "refunds_payable"] as const)
    .map(
      (account) =>
        `coalesce(sum(CASE WHEN t.to_account = '${account}' THEN t.amount_cents WHEN t.from_account = '${account}' THEN -t.amount_cents END), 0)::bigint AS ${account === "refunds_payable" ? "payable" : account}`,
    )
    .join(", ")}
     FROM ledger_transfer t WHERE t.user_id = p.user_id AND t.payment_id = p.id`,
);

/** The order `o` (in the query) has shipped: what it holds then is goods-conserved's to check. */
const SHIPPED = sql`EXISTS (SELECT 1 FROM shipment_line sl WHERE sl.user_id = o.user_id AND sl.order_id = o.id)`;

/** The order `o` (in the query) has no refund in flight and none that settled within the lag. */
const SETTLED = (opts: Required<ReconcileOptions>) => sql`
  NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = o.user_id AND r.order_id = o.id
               AND (r.status IN ('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING')
                    OR r.updated_at > now() - ${opts.lagSeconds} * interval '1 second'))`;

const INVARIANTS: Invariant[] = [
  {
    name: "one-order-per-request",
    description: "One order per (shopper, request_id).",
    checks: [
      {
        message: "several orders share a request id",
        query: () => sql`SELECT user_id, request_id, count(*)::int AS orders FROM orders
                          GROUP BY user_id, request_id HAVING count(*) > 1`,
      },
    ],
  },
  {
    name: "one-successful-payment",
    description:
      "At most one successful payment per order, for exactly the order's amount; paid orders have it.",
    checks: [
      {
        message: "several successful payments for one order",
        query: () => sql`SELECT order_id, count(*)::int AS successes FROM payment_order
                          WHERE status = 'SUCCESS' GROUP BY order_id HAVING count(*) > 1`,
      },
      {
        message: "payment amount differs from the order's",
        query:
          () => sql`SELECT p.out_trade_no, p.amount_cents AS paid, o.amount_cents AS ordered FROM payment_order p
                          JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
                         WHERE p.status = 'SUCCESS' AND (p.amount_cents <> o.amount_cents OR p.currency <> o.currency)`,
      },
      {
        message: "order marked paid without a successful payment",
        query: () => sql`SELECT o.id AS order_id, o.status FROM orders o
                         WHERE o.status IN ${PAID_STATUSES}
                           AND NOT EXISTS (SELECT 1 FROM payment_order p WHERE p.user_id = o.user_id AND p.order_id = o.id AND p.status = 'SUCCESS')`,
      },
      {
        message: "successful payment but the order still awaits payment",
        query: () => sql`SELECT o.id AS order_id, p.out_trade_no FROM orders o
                          JOIN payment_order p ON p.user_id = o.user_id AND p.order_id = o.id AND p.status = 'SUCCESS'
                         WHERE o.status = 'PENDING_PAYMENT'`,
      },
    ],
  },
  {
    name: "stock-deducted-once",
    description:
      "Once its OrderPaid is consumed, a paid order has exactly one deduction per line, for the line's quantity (less what a line refund gave back before it ran).",
    checks: [
      {
        message: "order line without its deduction, or with another quantity",
        query: () => sql`SELECT i.order_id, i.sku_id, i.quantity, d.quantity AS deducted, k.keeps
                           FROM (${consumed("OrderPaid", "stock")}) c
                           JOIN order_item i ON i.user_id = c.user_id AND i.order_id = c.order_id
                           LEFT JOIN stock_deduct_record d ON d.user_id = i.user_id AND d.order_id = i.order_id AND d.sku_id = i.sku_id
                           CROSS JOIN LATERAL (
                             SELECT i.quantity - coalesce(sum(l.quantity), 0) AS keeps
                               FROM refund_line l JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id AND r.status = 'REFUND_SUCCESS'
                              WHERE l.user_id = i.user_id AND l.order_id = i.order_id AND l.sku_id = i.sku_id) k
                          WHERE c.result = 'APPLIED'
                            AND (CASE WHEN d.id IS NULL THEN k.keeps > 0
                                      ELSE d.quantity > i.quantity OR d.quantity < k.keeps END)`,
      },
      {
        message: "deduction that matches no order line",
        query: () => sql`SELECT d.order_id, d.sku_id, d.quantity FROM stock_deduct_record d
                          WHERE NOT EXISTS (SELECT 1 FROM order_item i WHERE i.user_id = d.user_id AND i.order_id = d.order_id AND i.sku_id = d.sku_id)`,
      },
      {
        message: "stock deducted for an order that did not pay",
        query:
          () => sql`SELECT DISTINCT d.order_id, o.status FROM stock_deduct_record d JOIN orders o ON o.user_id = d.user_id AND o.id = d.order_id
                          WHERE o.status NOT IN ${PAID_STATUSES}`,
      },
    ],
  },
  {
    name: "benefits-granted-once",
    description:
      "Once its OrderPaid is consumed while the order was PAID, it has exactly one grant per benefit type.",
    checks: [
      {
        message: "benefit type missing",
        query: () => sql`SELECT c.order_id, t.benefit_type FROM (${consumed("OrderPaid", "benefits")}) c
                          CROSS JOIN (VALUES ('LOYALTY_POINTS'), ('COUPON')) AS t(benefit_type)
                          WHERE c.result = 'APPLIED' AND NOT EXISTS (SELECT 1 FROM benefit_grant g
                                             WHERE g.user_id = c.user_id AND g.order_id = c.order_id AND g.benefit_type = t.benefit_type)`,
      },
    ],
  },
  {
    name: "shipped-once",
    description:
      "Once its StockDeducted is consumed, an order has exactly one shipment; only such orders ship.",
    checks: [
      {
        message: "consumed but not shipped",
        query: () => sql`SELECT c.order_id FROM (${consumed("StockDeducted", "shipping")}) c
                          WHERE c.result = 'APPLIED' AND NOT EXISTS (SELECT 1 FROM shipment s WHERE s.user_id = c.user_id AND s.order_id = c.order_id)`,
      },
      {
        message: "shipment without deducted stock",
        query: () => sql`SELECT s.order_id FROM shipment s
                          WHERE NOT EXISTS (SELECT 1 FROM stock_deduct_record d WHERE d.user_id = s.user_id AND d.order_id = s.order_id)`,
      },
    ],
  },
  {
    name: "refunded-orders-net-zero",
    description:
      "An order refunded in full keeps nothing: every unit of stock it took is returned, every benefit reversed, and it ships only if it shipped before the refund.",
    checks: [
      {
        message: "fully refunded order still holds stock (it never shipped)",
        query: (o) => sql`SELECT h.order_id, h.sku_id, h.held FROM (${HELD_STOCK}) h
                           JOIN orders o ON o.user_id = h.user_id AND o.id = h.order_id AND o.status = 'REFUNDED'
                          WHERE o.updated_at < now() - ${o.lagSeconds} * interval '1 second' AND h.held > 0
                            AND NOT ${SHIPPED}`,
      },
      {
        message:
          "fully refunded order still holds a benefit (points not all taken back, or its coupon not revoked)",
        query: (o) => sql`SELECT g.order_id, g.benefit_type, g.amount,
                                 coalesce((SELECT sum(r.amount) FROM benefit_reversal r
                                            WHERE r.user_id = g.user_id AND r.order_id = g.order_id AND r.benefit_type = g.benefit_type), 0)::int AS reversed
                            FROM benefit_grant g
                           JOIN orders o ON o.user_id = g.user_id AND o.id = g.order_id AND o.status = 'REFUNDED'
                          WHERE o.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                            AND CASE WHEN g.benefit_type = 'COUPON'
                                     THEN NOT EXISTS (SELECT 1 FROM benefit_reversal r
                                                       WHERE r.user_id = g.user_id AND r.order_id = g.order_id AND r.benefit_type = 'COUPON')
                                     ELSE g.amount > coalesce((SELECT sum(r.amount) FROM benefit_reversal r
                                                                WHERE r.user_id = g.user_id AND r.order_id = g.order_id AND r.benefit_type = g.benefit_type), 0)
                                END`,
      },
      {
        message: "shipped after it was refunded",
        query: () => sql`SELECT s.order_id, s.created_at FROM shipment s
                          JOIN orders o ON o.user_id = s.user_id AND o.id = s.order_id AND o.status = 'REFUNDED'
                          JOIN refund_order r ON r.user_id = o.user_id AND r.order_id = o.id AND r.status = 'REFUND_SUCCESS'
                         GROUP BY s.order_id, s.created_at
                        HAVING s.created_at > max(r.updated_at)`,
      },
    ],
  },
  {
    name: "stock-balances",
    description: "Stock is never negative and equals initial stock − deductions + returns.",
    checks: [
      {
        message: "stock does not balance",
        query: () => sql`SELECT s.id AS sku_id, s.stock, s.initial_stock,
                                coalesce(d.total, 0)::int AS deducted, coalesce(r.total, 0)::int AS returned
                           FROM sku s
                           LEFT JOIN (SELECT sku_id, sum(quantity) AS total FROM stock_deduct_record GROUP BY sku_id) d
                             ON d.sku_id = s.id
                           LEFT JOIN (SELECT sku_id, sum(quantity) AS total FROM stock_return_record GROUP BY sku_id) r
                             ON r.sku_id = s.id
                          WHERE s.stock < 0
                             OR s.stock <> s.initial_stock - coalesce(d.total, 0) + coalesce(r.total, 0)`,
      },
      {
        message: "more returned than deducted",
        query:
          () => sql`SELECT r.order_id, r.sku_id, sum(r.quantity)::int AS returned, max(d.quantity) AS deducted
                           FROM stock_return_record r
                           LEFT JOIN stock_deduct_record d ON d.user_id = r.user_id AND d.order_id = r.order_id AND d.sku_id = r.sku_id
                          GROUP BY r.order_id, r.sku_id
                         HAVING count(d.id) = 0 OR sum(r.quantity) > max(d.quantity)`,
      },
    ],
  },
  {
    name: "partial-refunds-give-back",
    description:
      "Once an order's refunds have settled, it holds the stock of what it still keeps (ordered less the lines refunds gave back) and the points its net amount paid earns (one per whole unit).",
    checks: [
      {
        message: "stock held is not what the order keeps",
        query: (
          o,
        ) => sql`SELECT h.order_id, h.sku_id, h.held, (i.quantity - coalesce(l.refunded, 0))::int AS keeps
                            FROM (${HELD_STOCK}) h
                            JOIN orders o ON o.user_id = h.user_id AND o.id = h.order_id AND o.status IN ('PAID', 'SHIPPED')
                            JOIN order_item i ON i.user_id = h.user_id AND i.order_id = h.order_id AND i.sku_id = h.sku_id
                            LEFT JOIN (SELECT l.user_id, l.order_id, l.sku_id, sum(l.quantity) AS refunded
                                         FROM refund_line l JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id AND r.status = 'REFUND_SUCCESS'
                                        GROUP BY l.user_id, l.order_id, l.sku_id) l ON l.user_id = h.user_id AND l.order_id = h.order_id AND l.sku_id = h.sku_id
                           WHERE h.held <> i.quantity - coalesce(l.refunded, 0)
                             AND NOT ${SHIPPED} AND ${SETTLED(o)}`,
      },
      {
        message: "points held do not follow the net amount paid",
        query: (o) => sql`SELECT g.order_id, g.amount AS granted, v.reversed, n.net
                            FROM benefit_grant g
                            JOIN orders o ON o.user_id = g.user_id AND o.id = g.order_id AND o.status IN ('PAID', 'SHIPPED')
                            CROSS JOIN LATERAL (SELECT coalesce(sum(amount), 0)::int AS reversed FROM benefit_reversal
                                                 WHERE user_id = g.user_id AND order_id = g.order_id
                                                   AND benefit_type = 'LOYALTY_POINTS') v
                            CROSS JOIN LATERAL (SELECT (o.amount_cents - coalesce(sum(r.amount_cents), 0))::bigint AS net
                                                  FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id AND p.status = 'SUCCESS'
                                                 WHERE r.user_id = o.user_id AND r.order_id = o.id AND r.status = 'REFUND_SUCCESS') n
                           WHERE g.benefit_type = 'LOYALTY_POINTS' AND g.amount - v.reversed <> floor(n.net / 100)
                             AND ${SETTLED(o)}`,
      },
    ],
  },
  {
    name: "refunds-within-paid",
    description:
      "Refunds of an order never add up to more than was paid; an order refunded in full is REFUNDED.",
    checks: [
      {
        message: "refunds exceed the payment",
        // Per payment: an order with a late payment beside its own has two, each refunded on its own.
        query:
          () => sql`SELECT p.order_id, p.out_trade_no, p.amount_cents AS paid, sum(r.amount_cents)::bigint AS refunded
                           FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
                          WHERE r.status NOT IN ('REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED')
                          GROUP BY p.user_id, p.id HAVING sum(r.amount_cents) > p.amount_cents`,
      },
      {
        message: "the successful refunds add up to the payment, but the order is not REFUNDED",
        query:
          () => sql`SELECT o.id AS order_id, o.status, p.amount_cents AS paid, sum(r.amount_cents)::bigint AS refunded
                           FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
                           JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
                          WHERE r.status = 'REFUND_SUCCESS' AND o.status <> 'REFUNDED' AND p.status = 'SUCCESS'
                          GROUP BY o.user_id, o.id, o.status, p.amount_cents HAVING sum(r.amount_cents) = p.amount_cents`,
      },
    ],
  },
  {
    name: "goods-conserved",
    description:
      "Goods come back only when they come back: once an order has shipped, the stock it holds is what its shipment carried less what was received back, per SKU; stock is given back for a return only as far as its goods were received, and no refund recorded after the shipment pays for lines whose goods were not.",
    checks: [
      {
        message: "a shipped order's stock is not what it shipped less what came back",
        query: (o) => sql`SELECT o.id AS order_id, o.status, s.sku_id, s.quantity AS shipped,
                                 coalesce(rr.received, 0)::int AS received, coalesce(h.held, 0)::int AS held
                            FROM shipment_line s
                            JOIN orders o ON o.user_id = s.user_id AND o.id = s.order_id
                            LEFT JOIN (SELECT user_id, order_id, sku_id, sum(quantity) AS received FROM return_receipt
                                        GROUP BY user_id, order_id, sku_id) rr
                              ON rr.user_id = s.user_id AND rr.order_id = s.order_id AND rr.sku_id = s.sku_id
                            LEFT JOIN (${HELD_STOCK}) h ON h.user_id = s.user_id AND h.order_id = s.order_id AND h.sku_id = s.sku_id
                           WHERE coalesce(h.held, 0) <> s.quantity - coalesce(rr.received, 0)
                             AND o.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                             AND ${SETTLED(o)}`,
      },
      {
        message: "stock given back for a return beyond what was received",
        query: () => sql`SELECT sr.order_id, sr.refund_id, sr.sku_id, sr.quantity AS returned,
                                coalesce(rr.quantity, 0) AS received
                           FROM stock_return_record sr
                           JOIN refund_order r ON r.user_id = sr.user_id AND r.id = sr.refund_id
                           JOIN shipment s ON s.user_id = sr.user_id AND s.order_id = sr.order_id
                           LEFT JOIN return_receipt rr ON rr.user_id = sr.user_id AND rr.refund_id = sr.refund_id AND rr.sku_id = sr.sku_id
                          WHERE r.created_at > s.created_at AND sr.quantity > coalesce(rr.quantity, 0)`,
      },
      {
        message: "lines refunded after the order shipped, without their goods received back",
        query: () => sql`SELECT r.order_id, r.refund_no, r.status FROM refund_order r
                           JOIN shipment s ON s.user_id = r.user_id AND s.order_id = r.order_id
                          WHERE r.created_at > s.created_at
                            AND r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_SUCCESS')
                            AND EXISTS (SELECT 1 FROM refund_line l WHERE l.user_id = r.user_id AND l.refund_id = r.id)
                            AND NOT EXISTS (SELECT 1 FROM return_receipt rr WHERE rr.user_id = r.user_id AND rr.refund_id = r.id)`,
      },
    ],
  },
  {
    name: "money-conserved",
    description:
      "Per order, once settled: captured − refunded = the price of what the order keeps (nothing for an order that ships nothing: closed, short of stock, refunded), per currency, never negative. Captured counts every payment the provider took for the order, late ones too.",
    checks: [
      {
        message: "the money an order holds is not the price of what it keeps",
        query: (o) => sql`SELECT o.id AS order_id, o.status, o.currency, m.captured, m.refunded,
                                 (m.captured - m.refunded)::bigint AS holds, k.keeps,
                                 (m.captured - m.refunded - k.keeps)::bigint AS difference
                            FROM orders o
                            CROSS JOIN LATERAL (
                              SELECT coalesce((SELECT sum(p.amount_cents) FROM payment_order p
                                                WHERE p.user_id = o.user_id AND p.order_id = o.id
                                                  AND p.status IN ('SUCCESS', 'PAID_LATE')), 0)::bigint AS captured,
                                     coalesce((SELECT sum(r.amount_cents) FROM refund_order r
                                                WHERE r.user_id = o.user_id AND r.order_id = o.id
                                                  AND r.status = 'REFUND_SUCCESS'), 0)::bigint AS refunded) m
                            CROSS JOIN LATERAL (
                              SELECT CASE WHEN o.status IN ('PAID', 'SHIPPED')
                                          THEN o.amount_cents - coalesce((
                                                 SELECT sum(r.amount_cents) FROM refund_order r
                                                   JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id AND p.status = 'SUCCESS'
                                                  WHERE r.user_id = o.user_id AND r.order_id = o.id AND r.status = 'REFUND_SUCCESS'), 0)
                                          ELSE 0 END::bigint AS keeps) k
                           WHERE (m.captured - m.refunded <> k.keeps OR m.captured - m.refunded < 0)
                             AND o.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                             AND ${SETTLED(o)}
                             AND NOT EXISTS (SELECT 1 FROM payment_order p WHERE p.user_id = o.user_id AND p.order_id = o.id
                                               AND p.updated_at > now() - ${o.lagSeconds} * interval '1 second')`,
      },
    ],
  },
  {
    name: "ledger-agrees",
    description:
      "The money ledger and the state tables tell the same story, per payment: the shopper has paid what was captured less refunds that succeeded, refunds owed are the refunds sent and not yet confirmed, the order keeps the rest; every transfer is in its payment's currency.",
    checks: [
      {
        message: "a payment's ledger balances differ from its payment and refunds",
        query: () => sql`SELECT p.out_trade_no, p.order_id, p.status,
                                -l.shopper AS ledger_paid, (s.captured - s.paid)::bigint AS paid,
                                l.revenue AS ledger_kept, (s.captured - s.owed - s.paid)::bigint AS kept,
                                l.payable AS ledger_owed, s.owed
                           FROM payment_order p
                           CROSS JOIN LATERAL (
                             SELECT (CASE WHEN p.status IN ('SUCCESS', 'PAID_LATE') THEN p.amount_cents ELSE 0 END)::bigint AS captured,
                                    coalesce(sum(r.amount_cents) FILTER (WHERE r.status IN ('REFUND_AWAITING_GOODS', 'REFUND_CREATED', 'REFUND_PROCESSING')), 0)::bigint AS owed,
                                    coalesce(sum(r.amount_cents) FILTER (WHERE r.status = 'REFUND_SUCCESS'), 0)::bigint AS paid
                               FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id) s
                           CROSS JOIN LATERAL (${LEDGER_OF_PAYMENT}) l
                          WHERE -l.shopper <> s.captured - s.paid OR l.revenue <> s.captured - s.owed - s.paid OR l.payable <> s.owed`,
      },
      {
        message: "a transfer in another currency than its payment's",
        query: () => sql`SELECT t.fact_key, t.currency, p.currency AS payment_currency FROM ledger_transfer t
                           JOIN payment_order p ON p.user_id = t.user_id AND p.id = t.payment_id
                          WHERE t.currency <> p.currency`,
      },
    ],
  },
  {
    name: "ledger-agrees-with-provider",
    description:
      "What MockPay holds of each payment (paid, less refunds it made) is what the ledger says the shopper has paid, once both have settled.",
    checks: [
      {
        message: "the provider holds another amount than the ledger says the shopper paid",
        query: (
          o,
        ) => sql`SELECT p.out_trade_no, p.order_id, t.status AS provider, h.at_provider, -l.shopper AS in_ledger
                            FROM payment_order p
                            JOIN provider_trade t ON t.out_trade_no = p.out_trade_no
                            CROSS JOIN LATERAL (
                              SELECT ((CASE WHEN t.status = 'PAID' THEN t.amount_cents ELSE 0 END)
                                      - coalesce((SELECT sum(pr.amount_cents) FROM provider_refund pr
                                                   WHERE pr.trade_id = t.id AND pr.status = 'SUCCEEDED'), 0))::bigint AS at_provider) h
                            CROSS JOIN LATERAL (${LEDGER_OF_PAYMENT}) l
                           WHERE h.at_provider <> -l.shopper
                             AND t.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                             AND p.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                             AND NOT EXISTS (SELECT 1 FROM provider_refund pr WHERE pr.trade_id = t.id
                                               AND pr.updated_at > now() - ${o.lagSeconds} * interval '1 second')
                             AND NOT EXISTS (SELECT 1 FROM refund_order r WHERE r.user_id = p.user_id AND r.payment_id = p.id
                                               AND r.updated_at > now() - ${o.lagSeconds} * interval '1 second')`,
      },
    ],
  },
  {
    name: "agrees-with-provider",
    description:
      "What MockPay took, the merchant knows: a trade paid there is a successful payment here, a refund made there is a successful refund here (after the threshold).",
    checks: [
      {
        message: "the provider was paid, the merchant's payment is not a success",
        query: (o) => sql`SELECT t.out_trade_no, t.status AS provider, p.status AS merchant, p.order_id
                            FROM provider_trade t JOIN payment_order p ON p.out_trade_no = t.out_trade_no
                           WHERE t.status = 'PAID' AND p.status NOT IN ('SUCCESS', 'PAID_LATE')
                             AND t.updated_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        message: "the provider refunded, the merchant's refund has not succeeded",
        query: (o) => sql`SELECT pr.refund_no, r.status AS merchant, r.order_id
                            FROM provider_refund pr LEFT JOIN refund_order r ON r.provider_refund_no = pr.refund_no
                           WHERE (r.status IS DISTINCT FROM 'REFUND_SUCCESS')
                             AND pr.created_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
    ],
  },
  {
    name: "events-delivered",
    description: "No outbox event stays undelivered, and no consumer job stays failed, past the threshold.",
    checks: [
      {
        message: "outbox event not relayed",
        query: (o) => sql`SELECT id, event_type, aggregate_id, created_at FROM outbox_event
                           WHERE published_at IS NULL AND created_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        message: "consumer job dead-lettered (out of attempts)",
        query: () => sql`SELECT id, key, attempts, last_error FROM graphile_worker.jobs
                          WHERE attempts >= max_attempts`,
      },
      {
        message: "consumer job still failing past the threshold",
        query: (o) => sql`SELECT id, key, attempts, last_error FROM graphile_worker.jobs
                           WHERE attempts > 0 AND attempts < max_attempts
                             AND created_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
    ],
  },
  {
    name: "late-payments-refunded",
    description:
      "Every payment the provider took is the order's one payment or is refunded in full: money that arrived for a closed order (or a second payment) goes back.",
    checks: [
      {
        message: "money received after the order stopped awaiting it, not refunded in full",
        query: (o) => sql`SELECT p.out_trade_no, p.order_id, p.amount_cents,
                                 coalesce(sum(r.amount_cents) FILTER (WHERE r.status = 'REFUND_SUCCESS'), 0) AS refunded
                            FROM payment_order p LEFT JOIN refund_order r ON r.user_id = p.user_id AND r.payment_id = p.id
                           WHERE p.status = 'PAID_LATE' AND p.paid_at < now() - ${o.lagSeconds} * interval '1 second'
                           GROUP BY p.user_id, p.id
                          HAVING coalesce(sum(r.amount_cents) FILTER (WHERE r.status = 'REFUND_SUCCESS'), 0) < p.amount_cents`,
      },
    ],
  },
  {
    name: "no-failed-refund-unnoticed",
    description:
      "No refund stays REFUND_FAILED past the threshold: the money is held until a person retries it. One marked superseded really has no room left (its amount or a line is more than other refunds left).",
    checks: [
      {
        message: "refund rejected by the provider and not retried",
        query: (
          o,
        ) => sql`SELECT provider_refund_no, refund_no, order_id, amount_cents, failure_reason, updated_at FROM refund_order
                           WHERE status = 'REFUND_FAILED' AND updated_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        message: "refund marked superseded, yet it would still fit beside the others",
        query: () => sql`SELECT r.provider_refund_no, r.order_id, r.amount_cents FROM refund_order r
                           JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
                          WHERE r.status = 'REFUND_SUPERSEDED'
                            AND r.amount_cents <= p.amount_cents
                                  - (SELECT coalesce(sum(o.amount_cents), 0) FROM refund_order o
                                      WHERE o.user_id = r.user_id AND o.payment_id = r.payment_id AND o.status NOT IN ('REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED'))
                            AND NOT ${A_LINE_NO_LONGER_FITS}`,
      },
    ],
  },
  {
    name: "coupons-used-once",
    description:
      "A coupon is spent at most once at a time, by its owner, on a live order that took its discount; a revoked coupon is never spent after it was revoked; an order that ended unpaid or refunded in full holds no coupon.",
    checks: [
      {
        message: "coupon spent by two orders",
        query: () => sql`SELECT code, count(*)::int AS orders FROM coupon_redemption
                          WHERE status = 'ACTIVE' GROUP BY code HAVING count(*) > 1`,
      },
      {
        message: "coupon held by an order that ended (closed or refunded in full)",
        query:
          () => sql`SELECT r.code, r.order_id, o.status FROM coupon_redemption r JOIN orders o ON o.user_id = r.user_id AND o.id = r.order_id
                          WHERE r.status = 'ACTIVE' AND o.status IN ('CLOSED', 'REFUNDED')`,
      },
      {
        message: "coupon spent by someone other than its owner, or its discount not the order's",
        query:
          () => sql`SELECT r.code, r.order_id, r.user_id, g.user_id AS owner, r.discount_cents, o.discount_cents AS order_discount
                           FROM coupon_redemption r JOIN benefit_grant g ON g.code = r.code JOIN orders o ON o.user_id = r.user_id AND o.id = r.order_id
                          WHERE r.user_id <> g.user_id OR o.user_id <> g.user_id OR r.discount_cents <> o.discount_cents`,
      },
      {
        message: "discounted order without a coupon",
        query: () => sql`SELECT o.id AS order_id, o.discount_cents FROM orders o
                          WHERE o.discount_cents > 0
                            AND NOT EXISTS (SELECT 1 FROM coupon_redemption r WHERE r.user_id = o.user_id AND r.order_id = o.id)`,
      },
      {
        message: "coupon spent after it was revoked",
        query: () => sql`SELECT r.code, r.order_id, r.created_at, v.created_at AS revoked_at
                           FROM coupon_redemption r JOIN benefit_grant g ON g.code = r.code
                           JOIN benefit_reversal v ON v.user_id = g.user_id AND v.order_id = g.order_id AND v.benefit_type = 'COUPON'
                          WHERE r.created_at > v.created_at`,
      },
    ],
  },
  {
    name: "unpaid-orders-close",
    description:
      "No order stays PENDING_PAYMENT past its payment timeout plus a grace period: the timeout job closes it.",
    checks: [
      {
        message: "unpaid past its timeout",
        query: (o) => sql`SELECT id AS order_id, created_at FROM orders
                           WHERE status = 'PENDING_PAYMENT'
                             AND created_at < now() - (${o.paymentTimeoutS} + greatest(${o.lagSeconds}, 60)) * interval '1 second'`,
      },
    ],
  },
  {
    name: "no-stuck-idempotency-records",
    description: "No idempotency record stays PROCESSING past its lease.",
    checks: [
      {
        message: "PROCESSING past its lease",
        query: () => sql`SELECT user_id, biz_type, idempotency_key, locked_until FROM idempotency_record
                          WHERE status = 'PROCESSING' AND locked_until < now()`,
      },
    ],
  },
];

/** Checks every invariant over the whole database and lists what breaks each, with the rows involved. */
export async function reconcile(db: Db, options: ReconcileOptions = {}): Promise<ReconciliationReport> {
  const o = {
    lagSeconds: options.lagSeconds ?? 60,
    sampleSize: options.sampleSize ?? 20,
    paymentTimeoutS: options.paymentTimeoutS ?? 900,
  };
  const invariants: InvariantResult[] = [];
  for (const invariant of INVARIANTS) {
    const violations: Violation[] = [];
    for (const check of invariant.checks) {
      const rows = await db.execute<Record<string, unknown>>(
        sql`SELECT * FROM (${check.query(o)}) AS violation LIMIT ${o.sampleSize}`,
      );
      if (rows.length > 0) violations.push({ message: check.message, rows: [...rows] });
    }
    invariants.push({ name: invariant.name, description: invariant.description, violations });
  }
  return { checkedAt: new Date(), ok: invariants.every((i) => i.violations.length === 0), invariants };
}

export function violationCount(report: ReconciliationReport): number {
  return report.invariants.reduce((sum, i) => sum + i.violations.length, 0);
}
