import { sql } from "drizzle-orm";
import { type CheckOptions, consumed, type Invariant, PAID_STATUSES } from "./invariant";

/** The coupon codes the orders in scope redeemed or were granted: a coupon's rules span its two orders. */
const codesOf = (o: CheckOptions) => sql`
  SELECT code FROM coupon_redemption WHERE ${o.scope.orders(sql`user_id`, sql`order_id`)}
   UNION SELECT code FROM benefit_grant WHERE code IS NOT NULL AND ${o.scope.orders(sql`user_id`, sql`order_id`)}`;

/** Each effect happened once: one order per request, one successful payment, stock, benefits and shipping once per order, events delivered, coupons used once, unpaid orders closed, no record left PROCESSING. */
export const ONCE_INVARIANTS: Invariant[] = [
  {
    name: "one-order-per-request",
    description: "One order per (shopper, request_id).",
    checks: [
      {
        message: "several orders share a request id",
        query: (
          o,
        ) => sql`SELECT user_id, request_id, (array_agg(id ORDER BY created_at))[1] AS order_id, count(*)::int AS orders FROM orders
                          WHERE (user_id, request_id) IN (SELECT x.user_id, x.request_id FROM orders x
                                                           WHERE ${o.scope.orders(sql`x.user_id`, sql`x.id`)})
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
        query: (o) => sql`SELECT user_id, order_id, count(*)::int AS successes FROM payment_order
                          WHERE status = 'SUCCESS' AND ${o.scope.orders(sql`user_id`, sql`order_id`)}
                          GROUP BY user_id, order_id HAVING count(*) > 1`,
      },
      {
        message: "payment amount differs from the order's",
        query: (
          x,
        ) => sql`SELECT p.user_id, p.order_id, p.out_trade_no, p.amount_cents AS paid, o.amount_cents AS ordered FROM payment_order p
                          JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
                         WHERE p.status = 'SUCCESS' AND (p.amount_cents <> o.amount_cents OR p.currency <> o.currency)
                           AND ${x.scope.orders(sql`p.user_id`, sql`p.order_id`)}`,
      },
      {
        message: "order marked paid without a successful payment",
        query: (x) => sql`SELECT o.user_id, o.id AS order_id, o.status FROM orders o
                         WHERE o.status IN ${PAID_STATUSES} AND ${x.scope.orders(sql`o.user_id`, sql`o.id`)}
                           AND NOT EXISTS (SELECT 1 FROM payment_order p WHERE p.user_id = o.user_id AND p.order_id = o.id AND p.status = 'SUCCESS')`,
      },
      {
        message: "successful payment but the order still awaits payment",
        query: (x) => sql`SELECT o.user_id, o.id AS order_id, p.out_trade_no FROM orders o
                          JOIN payment_order p ON p.user_id = o.user_id AND p.order_id = o.id AND p.status = 'SUCCESS'
                         WHERE o.status = 'PENDING_PAYMENT' AND ${x.scope.orders(sql`o.user_id`, sql`o.id`)}`,
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
        query: (o) => sql`SELECT i.user_id, i.order_id, i.sku_id, i.quantity, d.quantity AS deducted, k.keeps
                           FROM (${consumed("OrderPaid", "stock", o.scope)}) c
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
        query: (o) => sql`SELECT d.user_id, d.order_id, d.sku_id, d.quantity FROM stock_deduct_record d
                          WHERE ${o.scope.orders(sql`d.user_id`, sql`d.order_id`)} AND NOT EXISTS (SELECT 1 FROM order_item i WHERE i.user_id = d.user_id AND i.order_id = d.order_id AND i.sku_id = d.sku_id)`,
      },
      {
        message: "stock deducted for an order that did not pay",
        query: (
          x,
        ) => sql`SELECT DISTINCT d.user_id, d.order_id, o.status FROM stock_deduct_record d JOIN orders o ON o.user_id = d.user_id AND o.id = d.order_id
                          WHERE o.status NOT IN ${PAID_STATUSES} AND ${x.scope.orders(sql`d.user_id`, sql`d.order_id`)}`,
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
        query: (
          o,
        ) => sql`SELECT c.user_id, c.order_id, t.benefit_type FROM (${consumed("OrderPaid", "benefits", o.scope)}) c
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
        query: (
          o,
        ) => sql`SELECT c.user_id, c.order_id FROM (${consumed("StockDeducted", "shipping", o.scope)}) c
                          WHERE c.result = 'APPLIED' AND NOT EXISTS (SELECT 1 FROM shipment s WHERE s.user_id = c.user_id AND s.order_id = c.order_id)`,
      },
      {
        message: "shipment without deducted stock",
        query: (o) => sql`SELECT s.user_id, s.order_id FROM shipment s
                          WHERE ${o.scope.orders(sql`s.user_id`, sql`s.order_id`)} AND NOT EXISTS (SELECT 1 FROM stock_deduct_record d WHERE d.user_id = s.user_id AND d.order_id = s.order_id)`,
      },
    ],
  },
  {
    name: "events-delivered",
    description: "No outbox event stays undelivered, and no consumer job stays failed, past the threshold.",
    checks: [
      {
        message: "outbox event not relayed",
        whole: true,
        query: (o) => sql`SELECT id, event_type, aggregate_id, created_at FROM outbox_event
                           WHERE published_at IS NULL AND created_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        message: "consumer job dead-lettered (out of attempts)",
        whole: true,
        query: () => sql`SELECT id, key, attempts, last_error FROM graphile_worker.jobs
                          WHERE attempts >= max_attempts`,
      },
      {
        message: "consumer job still failing past the threshold",
        whole: true,
        query: (o) => sql`SELECT id, key, attempts, last_error FROM graphile_worker.jobs
                           WHERE attempts > 0 AND attempts < max_attempts
                             AND created_at < now() - ${o.lagSeconds} * interval '1 second'`,
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
        query: (o) => sql`SELECT code, count(*)::int AS orders FROM coupon_redemption
                          WHERE status = 'ACTIVE' AND code IN (${codesOf(o)}) GROUP BY code HAVING count(*) > 1`,
      },
      {
        message: "coupon held by an order that ended (closed or refunded in full)",
        query: (
          x,
        ) => sql`SELECT r.code, r.user_id, r.order_id, o.status FROM coupon_redemption r JOIN orders o ON o.user_id = r.user_id AND o.id = r.order_id
                          WHERE r.status = 'ACTIVE' AND o.status IN ('CLOSED', 'REFUNDED') AND ${x.scope.orders(sql`r.user_id`, sql`r.order_id`)}`,
      },
      {
        message: "coupon spent by someone other than its owner, or its discount not the order's",
        query: (
          x,
        ) => sql`SELECT r.code, r.order_id, r.user_id, g.user_id AS owner, r.discount_cents, o.discount_cents AS order_discount
                           FROM coupon_redemption r JOIN benefit_grant g ON g.code = r.code JOIN orders o ON o.user_id = r.user_id AND o.id = r.order_id
                          WHERE (r.user_id <> g.user_id OR o.user_id <> g.user_id OR r.discount_cents <> o.discount_cents)
                            AND r.code IN (${codesOf(x)})`,
      },
      {
        message: "discounted order without a coupon",
        query: (x) => sql`SELECT o.user_id, o.id AS order_id, o.discount_cents FROM orders o
                          WHERE o.discount_cents > 0 AND ${x.scope.orders(sql`o.user_id`, sql`o.id`)}
                            AND NOT EXISTS (SELECT 1 FROM coupon_redemption r WHERE r.user_id = o.user_id AND r.order_id = o.id)`,
      },
      {
        message: "coupon spent after it was revoked",
        query: (o) => sql`SELECT r.code, r.user_id, r.order_id, r.created_at, v.created_at AS revoked_at
                           FROM coupon_redemption r JOIN benefit_grant g ON g.code = r.code
                           JOIN benefit_reversal v ON v.user_id = g.user_id AND v.order_id = g.order_id AND v.benefit_type = 'COUPON'
                          WHERE r.created_at > v.created_at AND r.code IN (${codesOf(o)})`,
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
        whole: true,
        query: (o) => sql`SELECT user_id, id AS order_id, created_at FROM orders
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
        whole: true,
        query: () => sql`SELECT user_id, biz_type, idempotency_key, locked_until FROM idempotency_record
                          WHERE status = 'PROCESSING' AND locked_until < now()`,
      },
    ],
  },
];
