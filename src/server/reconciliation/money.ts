import { sql } from "drizzle-orm";
import { A_LINE_NO_LONGER_FITS } from "~/server/refunds/transitions";
import { HELD_STOCK, type Invariant, LEDGER_OF_PAYMENT, SETTLED, SHIPPED } from "./invariant";

/** Money is conserved: captured − refunded = what the order keeps, per payment and per order, in the ledger and at the provider. */
export const MONEY_INVARIANTS: Invariant[] = [
  {
    name: "refunded-orders-net-zero",
    description:
      "An order refunded in full keeps nothing: every unit of stock it took is returned, every benefit reversed, and it ships only if it shipped before the refund.",
    checks: [
      {
        message: "fully refunded order still holds stock (it never shipped)",
        query: (o) => sql`SELECT h.user_id, h.order_id, h.sku_id, h.held FROM (${HELD_STOCK}) h
                           JOIN orders o ON o.user_id = h.user_id AND o.id = h.order_id AND o.status = 'REFUNDED'
                          WHERE ${o.scope.orders(sql`o.user_id`, sql`o.id`)} AND o.updated_at < now() - ${o.lagSeconds} * interval '1 second' AND h.held > 0
                            AND NOT ${SHIPPED}`,
      },
      {
        message:
          "fully refunded order still holds a benefit (points not all taken back, or its coupon not revoked)",
        query: (o) => sql`SELECT g.user_id, g.order_id, g.benefit_type, g.amount,
                                 coalesce((SELECT sum(r.amount) FROM benefit_reversal r
                                            WHERE r.user_id = g.user_id AND r.order_id = g.order_id AND r.benefit_type = g.benefit_type), 0)::int AS reversed
                            FROM benefit_grant g
                           JOIN orders o ON o.user_id = g.user_id AND o.id = g.order_id AND o.status = 'REFUNDED'
                          WHERE ${o.scope.orders(sql`o.user_id`, sql`o.id`)} AND o.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                            AND CASE WHEN g.benefit_type = 'COUPON'
                                     THEN NOT EXISTS (SELECT 1 FROM benefit_reversal r
                                                       WHERE r.user_id = g.user_id AND r.order_id = g.order_id AND r.benefit_type = 'COUPON')
                                     ELSE g.amount > coalesce((SELECT sum(r.amount) FROM benefit_reversal r
                                                                WHERE r.user_id = g.user_id AND r.order_id = g.order_id AND r.benefit_type = g.benefit_type), 0)
                                END`,
      },
      {
        message: "shipped after it was refunded",
        query: (x) => sql`SELECT s.user_id, s.order_id, s.created_at FROM shipment s
                          JOIN orders o ON o.user_id = s.user_id AND o.id = s.order_id AND o.status = 'REFUNDED'
                          JOIN refund_order r ON r.user_id = o.user_id AND r.order_id = o.id AND r.status = 'REFUND_SUCCESS'
                         WHERE ${x.scope.orders(sql`s.user_id`, sql`s.order_id`)}
                         GROUP BY s.user_id, s.order_id, s.created_at
                        HAVING s.created_at > max(r.updated_at)`,
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
        ) => sql`SELECT h.user_id, h.order_id, h.sku_id, h.held, (i.quantity - coalesce(l.refunded, 0))::int AS keeps
                            FROM (${HELD_STOCK}) h
                            JOIN orders o ON o.user_id = h.user_id AND o.id = h.order_id AND o.status IN ('PAID', 'SHIPPED')
                            JOIN order_item i ON i.user_id = h.user_id AND i.order_id = h.order_id AND i.sku_id = h.sku_id
                            LEFT JOIN (SELECT l.user_id, l.order_id, l.sku_id, sum(l.quantity) AS refunded
                                         FROM refund_line l JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id AND r.status = 'REFUND_SUCCESS'
                                        GROUP BY l.user_id, l.order_id, l.sku_id) l ON l.user_id = h.user_id AND l.order_id = h.order_id AND l.sku_id = h.sku_id
                           WHERE h.held <> i.quantity - coalesce(l.refunded, 0) AND ${o.scope.orders(sql`o.user_id`, sql`o.id`)}
                             AND NOT ${SHIPPED} AND ${SETTLED(o)}`,
      },
      {
        message: "points held do not follow the net amount paid",
        query: (o) => sql`SELECT g.user_id, g.order_id, g.amount AS granted, v.reversed, n.net
                            FROM benefit_grant g
                            JOIN orders o ON o.user_id = g.user_id AND o.id = g.order_id AND o.status IN ('PAID', 'SHIPPED')
                            CROSS JOIN LATERAL (SELECT coalesce(sum(amount), 0)::int AS reversed FROM benefit_reversal
                                                 WHERE user_id = g.user_id AND order_id = g.order_id
                                                   AND benefit_type = 'LOYALTY_POINTS') v
                            CROSS JOIN LATERAL (SELECT (o.amount_cents - coalesce(sum(r.amount_cents), 0))::bigint AS net
                                                  FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id AND p.status = 'SUCCESS'
                                                 WHERE r.user_id = o.user_id AND r.order_id = o.id AND r.status = 'REFUND_SUCCESS') n
                           WHERE g.benefit_type = 'LOYALTY_POINTS' AND g.amount - v.reversed <> floor(n.net / 100)
                             AND ${o.scope.orders(sql`g.user_id`, sql`g.order_id`)}
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
        query: (
          o,
        ) => sql`SELECT p.user_id, p.order_id, p.out_trade_no, p.amount_cents AS paid, sum(r.amount_cents)::bigint AS refunded
                           FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
                          WHERE r.status NOT IN ('REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED')
                            AND ${o.scope.orders(sql`r.user_id`, sql`r.order_id`)}
                          GROUP BY p.user_id, p.id HAVING sum(r.amount_cents) > p.amount_cents`,
      },
      {
        message: "the successful refunds add up to the payment, but the order is not REFUNDED",
        query: (
          x,
        ) => sql`SELECT o.user_id, o.id AS order_id, o.status, p.amount_cents AS paid, sum(r.amount_cents)::bigint AS refunded
                           FROM refund_order r JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
                           JOIN orders o ON o.user_id = p.user_id AND o.id = p.order_id
                          WHERE r.status = 'REFUND_SUCCESS' AND o.status <> 'REFUNDED' AND p.status = 'SUCCESS'
                            AND ${x.scope.orders(sql`r.user_id`, sql`r.order_id`)}
                          GROUP BY o.user_id, o.id, o.status, p.amount_cents HAVING sum(r.amount_cents) = p.amount_cents`,
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
        query: (o) => sql`SELECT o.user_id, o.id AS order_id, o.status, o.currency, m.captured, m.refunded,
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
                             AND ${o.scope.orders(sql`o.user_id`, sql`o.id`)}
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
        query: (o) => sql`SELECT p.user_id, p.out_trade_no, p.order_id, p.status,
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
                          WHERE (-l.shopper <> s.captured - s.paid OR l.revenue <> s.captured - s.owed - s.paid OR l.payable <> s.owed)
                            AND ${o.scope.orders(sql`p.user_id`, sql`p.order_id`)}`,
      },
      {
        message: "a transfer in another currency than its payment's",
        query: (
          o,
        ) => sql`SELECT t.user_id, t.order_id, t.fact_key, t.currency, p.currency AS payment_currency FROM ledger_transfer t
                           JOIN payment_order p ON p.user_id = t.user_id AND p.id = t.payment_id
                          WHERE t.currency <> p.currency AND ${o.scope.orders(sql`t.user_id`, sql`t.order_id`)}`,
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
        ) => sql`SELECT p.user_id, p.out_trade_no, p.order_id, t.status AS provider, h.at_provider, -l.shopper AS in_ledger
                            FROM payment_order p
                            JOIN provider_trade t ON t.out_trade_no = p.out_trade_no
                            CROSS JOIN LATERAL (
                              SELECT ((CASE WHEN t.status = 'PAID' THEN t.amount_cents ELSE 0 END)
                                      - coalesce((SELECT sum(pr.amount_cents) FROM provider_refund pr
                                                   WHERE pr.trade_id = t.id AND pr.status = 'SUCCEEDED'), 0))::bigint AS at_provider) h
                            CROSS JOIN LATERAL (${LEDGER_OF_PAYMENT}) l
                           WHERE h.at_provider <> -l.shopper AND ${o.scope.orders(sql`p.user_id`, sql`p.order_id`)}
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
      "What MockPay took, the merchant knows: a trade paid there is a successful payment here, a refund made there is a successful refund here, and a refund succeeded here was made there (after the threshold).",
    checks: [
      {
        message: "the provider was paid, the merchant's payment is not a success",
        query: (
          o,
        ) => sql`SELECT t.out_trade_no, t.status AS provider, p.status AS merchant, p.user_id, p.order_id
                            FROM provider_trade t JOIN payment_order p ON p.out_trade_no = t.out_trade_no
                           WHERE t.status = 'PAID' AND p.status NOT IN ('SUCCESS', 'PAID_LATE')
                             AND ${o.scope.orders(sql`p.user_id`, sql`p.order_id`)}
                             AND t.updated_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        // Only what MockPay made: a refund it accepted and then failed (FAILED there) returned nothing, and
        // the merchant may rightly hold it as failed or superseded.
        message: "the provider refunded, the merchant's refund has not succeeded",
        query: (o) => sql`SELECT pr.refund_no, r.status AS merchant, p.user_id, p.order_id
                            FROM provider_refund pr JOIN provider_trade t ON t.id = pr.trade_id
                            JOIN payment_order p ON p.out_trade_no = t.out_trade_no
                            LEFT JOIN refund_order r ON r.provider_refund_no = pr.refund_no
                           WHERE pr.status = 'SUCCEEDED' AND (r.status IS DISTINCT FROM 'REFUND_SUCCESS')
                             AND ${o.scope.orders(sql`p.user_id`, sql`p.order_id`)}
                             AND pr.updated_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        message: "the merchant's refund succeeded, the provider's did not",
        query: (
          o,
        ) => sql`SELECT r.provider_refund_no AS refund_no, pr.status AS provider, r.user_id, r.order_id
                            FROM refund_order r LEFT JOIN provider_refund pr ON pr.refund_no = r.provider_refund_no
                           WHERE r.status = 'REFUND_SUCCESS' AND (pr.status IS DISTINCT FROM 'SUCCEEDED')
                             AND ${o.scope.orders(sql`r.user_id`, sql`r.order_id`)}
                             AND r.updated_at < now() - ${o.lagSeconds} * interval '1 second'`,
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
        query: (o) => sql`SELECT p.user_id, p.out_trade_no, p.order_id, p.amount_cents,
                                 coalesce(sum(r.amount_cents) FILTER (WHERE r.status = 'REFUND_SUCCESS'), 0) AS refunded
                            FROM payment_order p LEFT JOIN refund_order r ON r.user_id = p.user_id AND r.payment_id = p.id
                           WHERE p.status = 'PAID_LATE' AND ${o.scope.orders(sql`p.user_id`, sql`p.order_id`)} AND p.paid_at < now() - ${o.lagSeconds} * interval '1 second'
                             AND p.updated_at < now() - ${o.lagSeconds} * interval '1 second'
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
        ) => sql`SELECT provider_refund_no, refund_no, user_id, order_id, amount_cents, failure_reason, updated_at FROM refund_order
                           WHERE status = 'REFUND_FAILED' AND ${o.scope.orders(sql`user_id`, sql`order_id`)} AND updated_at < now() - ${o.lagSeconds} * interval '1 second'`,
      },
      {
        message: "refund marked superseded, yet it would still fit beside the others",
        query: (
          x,
        ) => sql`SELECT r.provider_refund_no, r.user_id, r.order_id, r.amount_cents FROM refund_order r
                           JOIN payment_order p ON p.user_id = r.user_id AND p.id = r.payment_id
                          WHERE r.status = 'REFUND_SUPERSEDED' AND ${x.scope.orders(sql`r.user_id`, sql`r.order_id`)}
                            AND r.amount_cents <= p.amount_cents
                                  - (SELECT coalesce(sum(o.amount_cents), 0) FROM refund_order o
                                      WHERE o.user_id = r.user_id AND o.payment_id = r.payment_id AND o.status NOT IN ('REFUND_FAILED', 'REFUND_SUPERSEDED', 'REFUND_CANCELLED'))
                            AND NOT ${A_LINE_NO_LONGER_FITS}`,
      },
    ],
  },
];
