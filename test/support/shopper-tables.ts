/** Tables that belong to one shopper: keyed by (user_id, …), distributed by user_id (docs/scale-out.md). */
export const SHOPPER_TABLES = [
  "orders",
  "order_item",
  "payment_order",
  "refund_order",
  "refund_line",
  "stock_deduct_record",
  "stock_return_record",
  "shipment",
  "benefit_grant",
  "benefit_reversal",
  "coupon_redemption",
  "outbox_event",
  "message_consume_record",
  "idempotency_record",
  "ledger_transfer",
  "return_receipt",
  "shipment_line",
];

/** Those that hang off an order (they have order_id). */
export const ORDER_CHILD_TABLES = SHOPPER_TABLES.filter(
  (table) => !["orders", "outbox_event", "message_consume_record", "idempotency_record"].includes(table),
);
