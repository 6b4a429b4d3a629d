import { sql } from "drizzle-orm";
import { HELD_STOCK, type Invariant, SETTLED } from "./invariant";

/** Goods are conserved: what the shelves hold, what orders took, what came back. */
export const GOODS_INVARIANTS: Invariant[] = [
  {
    name: "stock-balances",
    description: "Stock is never negative and equals initial stock − deductions + returns.",
    checks: [
      {
        message: "stock does not balance",
        whole: true,
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
        query: (
          o,
        ) => sql`SELECT r.user_id, r.order_id, r.sku_id, sum(r.quantity)::int AS returned, max(d.quantity) AS deducted
                           FROM stock_return_record r
                           LEFT JOIN stock_deduct_record d ON d.user_id = r.user_id AND d.order_id = r.order_id AND d.sku_id = r.sku_id
                          WHERE ${o.scope.orders(sql`r.user_id`, sql`r.order_id`)}
                          GROUP BY r.user_id, r.order_id, r.sku_id
                         HAVING count(d.id) = 0 OR sum(r.quantity) > max(d.quantity)`,
      },
    ],
  },
  {
    name: "goods-conserved",
    description:
      "Goods come back only when they come back: per order and SKU, stock deducted − stock returned = units shipped and not received back + units held for it (none once it has shipped and its refunds settled); stock is given back for a return only as far as its goods were received; a refund pays only for units that never shipped or that came back.",
    checks: [
      {
        message: "a shipped order's stock is not what it shipped less what came back",
        query: (o) => sql`SELECT o.user_id, o.id AS order_id, o.status, s.sku_id, s.quantity AS shipped,
                                 coalesce(rr.received, 0)::int AS received, coalesce(h.held, 0)::int AS held
                            FROM shipment_line s
                            JOIN orders o ON o.user_id = s.user_id AND o.id = s.order_id
                            LEFT JOIN (SELECT user_id, order_id, sku_id, sum(quantity) AS received FROM return_receipt
                                        GROUP BY user_id, order_id, sku_id) rr
                              ON rr.user_id = s.user_id AND rr.order_id = s.order_id AND rr.sku_id = s.sku_id
                            LEFT JOIN (${HELD_STOCK}) h ON h.user_id = s.user_id AND h.order_id = s.order_id AND h.sku_id = s.sku_id
                           WHERE coalesce(h.held, 0) <> s.quantity - coalesce(rr.received, 0)
                             AND ${o.scope.orders(sql`s.user_id`, sql`s.order_id`)}
                             AND o.updated_at < now() - ${o.lagSeconds} * interval '1 second'
                             AND ${SETTLED(o)}`,
      },
      {
        message: "stock given back for a return beyond what was received",
        query: (o) => sql`SELECT sr.user_id, sr.order_id, sr.refund_id, sr.sku_id, sr.quantity AS returned,
                                coalesce(rr.quantity, 0) AS received
                           FROM stock_return_record sr
                           JOIN refund_order r ON r.user_id = sr.user_id AND r.id = sr.refund_id
                           JOIN shipment s ON s.user_id = sr.user_id AND s.order_id = sr.order_id
                           LEFT JOIN return_receipt rr ON rr.user_id = sr.user_id AND rr.refund_id = sr.refund_id AND rr.sku_id = sr.sku_id
                          WHERE r.created_at > s.created_at AND sr.quantity > coalesce(rr.quantity, 0)
                            AND ${o.scope.orders(sql`sr.user_id`, sql`sr.order_id`)}`,
      },
      {
        // Per (order, SKU): refunds that pay for lines without a receipt pay for units that never shipped; there
        // are only ordered − shipped of those. Whenever the refund was recorded (before the shipment, rejected,
        // and retried after it, say).
        message: "refunds pay for more units than never shipped (goods with the shopper, not received back)",
        query: (
          o,
        ) => sql`SELECT i.user_id, i.order_id, i.sku_id, i.quantity AS ordered, coalesce(sl.quantity, 0) AS shipped,
                                c.paying
                           FROM shipment s
                           JOIN order_item i ON i.user_id = s.user_id AND i.order_id = s.order_id
                           LEFT JOIN shipment_line sl ON sl.user_id = i.user_id AND sl.order_id = i.order_id AND sl.sku_id = i.sku_id
                           CROSS JOIN LATERAL (
                             SELECT coalesce(sum(l.quantity), 0)::int AS paying FROM refund_line l
                               JOIN refund_order r ON r.user_id = l.user_id AND r.id = l.refund_id
                              WHERE l.user_id = i.user_id AND l.order_id = i.order_id AND l.sku_id = i.sku_id
                                AND r.status IN ('REFUND_CREATED', 'REFUND_PROCESSING', 'REFUND_SUCCESS')
                                AND NOT EXISTS (SELECT 1 FROM return_receipt rr WHERE rr.user_id = r.user_id AND rr.refund_id = r.id)) c
                          WHERE c.paying > i.quantity - coalesce(sl.quantity, 0)
                            AND ${o.scope.orders(sql`s.user_id`, sql`s.order_id`)}`,
      },
    ],
  },
];
