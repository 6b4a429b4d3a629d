/**
 * The merchant's tables. Longer than 400 lines on purpose: its tables reference one another by foreign key
 * (orders, payments, refunds, their lines and the ledger), and split into files their modules would import one
 * another, a circle in the import graph.
 */
import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import {
  type AnyPgColumn,
  bigint,
  boolean,
  check,
  foreignKey,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { createdAt, identity, identityPart, inList } from "./columns";

// The merchant's business: catalogue, orders, payments, outbox, fulfilment, refunds.
//
// Longer than the other files on purpose: it is a table of tables. Each references its parents by
// (user_id, id), and one file lets a reader check every key and reference against the others in one place
// (drizzle-kit reads this folder; the system's own tables are in ./operations.ts).
//
// Ready to shard by shopper (docs/scale-out.md, test/shard-ready.test.ts): every table a shopper's
// requests write carries `user_id`, the future distribution column. Its primary key and every unique key
// lead with it, and it references its parents by (user_id, id), so a shopper's rows always sit together.

/** The shopper's id, on every shopper-owned row. */
const shopper = () => text().notNull();
/** (user_id, id): the primary key of a shopper-owned table. */
const shopperKey = (name: string, t: { userId: AnyPgColumn; id: AnyPgColumn }) =>
  primaryKey({ name, columns: [t.userId, t.id] });
/** A reference to the shopper's own order: (user_id, order_id) → orders (user_id, id). */
const toOrder = (name: string, t: { userId: AnyPgColumn; orderId: AnyPgColumn }) =>
  foreignKey({ name, columns: [t.userId, t.orderId], foreignColumns: [orders.userId, orders.id] });
/** A reference to the shopper's own refund. */
const toRefund = (name: string, t: { userId: AnyPgColumn; refundId: AnyPgColumn }) =>
  foreignKey({ name, columns: [t.userId, t.refundId], foreignColumns: [refundOrder.userId, refundOrder.id] });
const skuRef = () =>
  text()
    .notNull()
    .references(() => sku.id);

export const sku = pgTable(
  "sku",
  {
    id: text().primaryKey(),
    name: text().notNull(),
    description: text().notNull().default(""),
    priceCents: integer().notNull(),
    currency: text().notNull().default("USD"),
    stock: integer().notNull(),
    /** Stock when the product was added: stock = initial − deductions + returns, always. */
    initialStock: integer().notNull().default(0),
    createdAt: createdAt(),
  },
  (t) => [
    check("sku_price_non_negative", sql`${t.priceCents} >= 0`),
    check("sku_stock_non_negative", sql`${t.stock} >= 0`),
  ],
);

export const ORDER_STATUSES = [
  "PENDING_PAYMENT",
  "PAID",
  "SHIPPED",
  "STOCK_SHORT",
  "CLOSED",
  "REFUNDED",
] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export const orders = pgTable(
  "orders",
  {
    id: uuid().notNull().defaultRandom(),
    userId: shopper(),
    requestId: text().notNull(),
    /**
     * sha256 of the request that placed the order (its canonical lines and coupon; fingerprint.ts): the business
     * key outlives the idempotency record, and a request id used again after the record expired must still be
     * the same request to be answered with this order.
     */
    requestFingerprint: text().notNull(),
    /** What the shopper pays: the lines' total less the coupon's discount. */
    amountCents: bigint({ mode: "number" }).notNull(),
    /** Taken off the lines' total by the coupon the order redeemed (0: none). */
    discountCents: integer().notNull().default(0),
    currency: text().notNull().default("USD"),
    status: text({ enum: ORDER_STATUSES }).notNull().default("PENDING_PAYMENT"),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    shopperKey("orders_pkey", t),
    uniqueIndex("orders_user_id_request_id_uq").on(t.userId, t.requestId),
    index("orders_user_id_created_at_idx").on(t.userId, t.createdAt),
    // The timeout job's question (orders unpaid past their time), asked of every shard: the unpaid ones only.
    index("orders_awaiting_payment_idx").on(t.createdAt).where(sql`status = 'PENDING_PAYMENT'`),
    check("orders_amount_non_negative", sql`${t.amountCents} >= 0`),
    check("orders_discount_non_negative", sql`${t.discountCents} >= 0`),
    check("orders_status_valid", sql.raw(`status IN (${ORDER_STATUSES.map((s) => `'${s}'`).join(", ")})`)),
  ],
);

export const orderItem = pgTable(
  "order_item",
  {
    id: uuid().notNull().defaultRandom(),
    userId: shopper(),
    orderId: uuid().notNull(),
    skuId: skuRef(),
    skuName: text().notNull(),
    quantity: integer().notNull(),
    unitPriceCents: integer().notNull(),
    lineTotalCents: bigint({ mode: "number" }).notNull(),
  },
  (t) => [
    shopperKey("order_item_pkey", t),
    toOrder("order_item_order_fk", t).onDelete("cascade"),
    uniqueIndex("order_item_order_id_sku_id_uq").on(t.userId, t.orderId, t.skuId),
    check("order_item_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

// ---------------------------------------------------------------------------
// Payments, merchant side

/**
 * PAID_LATE: the provider took money on a payment that is not the order's (it arrived after the order
 * was closed, or paid by another payment); it is refunded in full automatically.
 */
export const PAYMENT_STATUSES = ["PENDING", "SUCCESS", "CLOSED", "FAILED", "PAID_LATE"] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export const paymentOrder = pgTable(
  "payment_order",
  {
    id: uuid().notNull().defaultRandom(),
    userId: shopper(),
    orderId: uuid().notNull(),
    outTradeNo: text().notNull(),
    amountCents: bigint({ mode: "number" }).notNull(),
    currency: text().notNull(),
    status: text({ enum: PAYMENT_STATUSES }).notNull().default("PENDING"),
    transactionId: text(),
    paidAt: timestamp({ withTimezone: true }),
    /** Last time the merchant asked the provider about this payment (lost notifications). */
    lastQueriedAt: timestamp({ withTimezone: true }),
    /** How often it was asked while PENDING; each answer that changes nothing doubles the wait before the next. */
    queryAttempts: integer().notNull().default(0),
    /** When to ask about a PENDING payment next (NULL: PAYMENT_QUERY_AFTER_S after it was made). */
    nextQueryAt: timestamp({ withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    shopperKey("payment_order_pkey", t),
    toOrder("payment_order_order_fk", t),
    uniqueIndex("payment_order_out_trade_no_uq").on(t.outTradeNo),
    // An order's payments (an incremental reconciliation reads those of the orders it checks).
    index("payment_order_order_idx").on(t.userId, t.orderId),
    uniqueIndex("payment_order_transaction_id_uq").on(t.transactionId),
    index("payment_order_pending_idx").on(t.createdAt).where(sql`status = 'PENDING'`),
    index("payment_order_query_schedule_idx")
      .on(t.queryAttempts, t.nextQueryAt)
      .where(sql`status = 'PENDING'`),
    // One open (or successful) payment per order; a closed one may be followed by a new one.
    uniqueIndex("payment_order_open_per_order_uq")
      .on(t.userId, t.orderId)
      .where(sql`status IN ('PENDING', 'SUCCESS')`),
    inList("payment_order_status_valid", "status", PAYMENT_STATUSES),
    check("payment_order_amount_positive", sql`${t.amountCents} > 0`),
  ],
);

export const NOTIFICATION_OUTCOMES = [
  "PROCESSED",
  "DUPLICATE",
  "IGNORED",
  "WRONG_APP",
  "MALFORMED",
  "UNKNOWN_PAYMENT",
  "AMOUNT_MISMATCH",
  "TRANSACTION_CLASH",
  "ERROR",
] as const;
export type NotificationOutcome = (typeof NOTIFICATION_OUTCOMES)[number];

/** Every verified notification the merchant received (signed by the provider, fresh), with what it did about it. */
export const paymentNotification = pgTable(
  "payment_notification",
  {
    id: identity(),
    notificationId: text(),
    deliveryId: text(),
    outTradeNo: text(),
    type: text(),
    outcome: text({ enum: NOTIFICATION_OUTCOMES }).notNull(),
    detail: text().notNull().default(""),
    /** Needs a person: an amount mismatch, say. */
    alert: boolean().notNull().default(false),
    httpStatus: integer().notNull(),
    receivedAt: createdAt(),
  },
  (t) => [
    index("payment_notification_out_trade_no_idx").on(t.outTradeNo, t.receivedAt),
    index("payment_notification_alert_idx").on(t.receivedAt).where(sql`alert`),
    inList("payment_notification_outcome_valid", "outcome", NOTIFICATION_OUTCOMES),
  ],
);

export const VERIFICATION_REFUSALS = ["BAD_SIGNATURE", "STALE_TIMESTAMP", "UNSIGNED"] as const;
export type VerificationRefusal = (typeof VERIFICATION_REFUSALS)[number];

/**
 * Notifications that failed verification (no signature, a bad one, a stale timestamp): anyone can
 * send those, so they are never stored one by one, never linked to a payment and never shown as a
 * fact. Only counted, per minute and reason, and kept for a day: bounded, whatever is sent.
 */
export const refusedNotification = pgTable(
  "refused_notification",
  {
    minute: timestamp({ withTimezone: true }).notNull(),
    reason: text({ enum: VERIFICATION_REFUSALS }).notNull(),
    count: integer().notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.minute, t.reason] }),
    inList("refused_notification_reason_valid", "reason", VERIFICATION_REFUSALS),
  ],
);

/**
 * "Revoke all my API tokens": every token a shopper was issued up to `revokedBefore` is refused from
 * then on (tokens carry their issue time, signed). One row per shopper who ever revoked.
 */
export const apiTokenRevocation = pgTable("api_token_revocation", {
  userId: text().primaryKey(),
  revokedBefore: timestamp({ withTimezone: true, mode: "date" }).notNull(),
});

/** Events written in the same transaction as the state change they announce. */
export const outboxEvent = pgTable(
  "outbox_event",
  {
    id: uuid().notNull().defaultRandom(),
    /** The shopper whose order the event is about: it is written in that order's transactions. */
    userId: shopper(),
    eventType: text().notNull(),
    aggregateType: text().notNull(),
    aggregateId: text().notNull(),
    /** One event per business fact, e.g. `OrderPaid:<order id>`. */
    dedupeKey: text().notNull(),
    payload: jsonb().notNull(),
    createdAt: createdAt(),
    publishedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    shopperKey("outbox_event_pkey", t),
    uniqueIndex("outbox_event_dedupe_key_uq").on(t.userId, t.dedupeKey),
    index("outbox_event_unpublished_idx").on(t.createdAt).where(sql`published_at IS NULL`),
    // An order's events (an incremental reconciliation reads those of the orders it checks).
    index("outbox_event_aggregate_idx").on(t.userId, t.aggregateId),
  ],
);

// ---------------------------------------------------------------------------
// Fulfilment: idempotent consumers of outbox events

export const CONSUME_STATUSES = ["PROCESSING", "DONE"] as const;

/** A consumer saw this event. Its business effect is protected by a unique key of its own too. */
export const messageConsumeRecord = pgTable(
  "message_consume_record",
  {
    id: identityPart(),
    userId: shopper(),
    eventId: uuid().notNull(),
    consumerName: text().notNull(),
    status: text({ enum: CONSUME_STATUSES }).notNull().default("PROCESSING"),
    /** What the consumer did: APPLIED, SKIPPED (nothing to do), … */
    result: text(),
    createdAt: createdAt(),
    doneAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    shopperKey("message_consume_record_pkey", t),
    foreignKey({
      name: "message_consume_record_event_fk",
      columns: [t.userId, t.eventId],
      foreignColumns: [outboxEvent.userId, outboxEvent.id],
    }),
    uniqueIndex("message_consume_record_event_consumer_uq").on(t.userId, t.eventId, t.consumerName),
    inList("message_consume_record_status_valid", "status", CONSUME_STATUSES),
  ],
);

export const stockDeductRecord = pgTable(
  "stock_deduct_record",
  {
    id: identityPart(),
    userId: shopper(),
    orderId: uuid().notNull(),
    skuId: skuRef(),
    quantity: integer().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("stock_deduct_record_pkey", t),
    toOrder("stock_deduct_record_order_fk", t),
    uniqueIndex("stock_deduct_record_order_sku_uq").on(t.userId, t.orderId, t.skuId),
    check("stock_deduct_record_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

export const BENEFIT_TYPES = ["LOYALTY_POINTS", "COUPON"] as const;

export const benefitGrant = pgTable(
  "benefit_grant",
  {
    id: identityPart(),
    orderId: uuid().notNull(),
    userId: shopper(),
    benefitType: text({ enum: BENEFIT_TYPES }).notNull(),
    /** Points, or the coupon's value in cents. */
    amount: integer().notNull(),
    code: text(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("benefit_grant_pkey", t),
    toOrder("benefit_grant_order_fk", t),
    uniqueIndex("benefit_grant_user_order_type_uq").on(t.userId, t.orderId, t.benefitType),
    uniqueIndex("benefit_grant_code_uq").on(t.code),
    // What a redemption references: a coupon is spent by its owner.
    uniqueIndex("benefit_grant_user_code_uq").on(t.userId, t.code),
    inList("benefit_grant_type_valid", "benefit_type", BENEFIT_TYPES),
  ],
);

export const COUPON_REDEMPTION_STATUSES = ["ACTIVE", "RELEASED"] as const;

/**
 * A coupon spent on an order, written in the order's own transaction. At most one ACTIVE
 * redemption per coupon (the coupon is used at most once) and per order; cancelling the order,
 * its timing out or its full refund releases it, and the coupon can be spent again.
 */
export const couponRedemption = pgTable(
  "coupon_redemption",
  {
    id: identityPart(),
    code: text().notNull(),
    userId: shopper(),
    orderId: uuid().notNull(),
    discountCents: integer().notNull(),
    status: text({ enum: COUPON_REDEMPTION_STATUSES }).notNull().default("ACTIVE"),
    createdAt: createdAt(),
    releasedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    shopperKey("coupon_redemption_pkey", t),
    toOrder("coupon_redemption_order_fk", t),
    foreignKey({
      name: "coupon_redemption_coupon_fk",
      columns: [t.userId, t.code],
      foreignColumns: [benefitGrant.userId, benefitGrant.code],
    }),
    uniqueIndex("coupon_redemption_active_code_uq").on(t.code).where(sql`status = 'ACTIVE'`),
    uniqueIndex("coupon_redemption_user_order_uq").on(t.userId, t.orderId),
    check("coupon_redemption_discount_positive", sql`${t.discountCents} > 0`),
    inList("coupon_redemption_status_valid", "status", COUPON_REDEMPTION_STATUSES),
  ],
);

export const shipment = pgTable(
  "shipment",
  {
    id: uuid().notNull().defaultRandom(),
    userId: shopper(),
    orderId: uuid().notNull(),
    trackingNo: text().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("shipment_pkey", t),
    toOrder("shipment_order_fk", t),
    uniqueIndex("shipment_order_uq").on(t.userId, t.orderId),
  ],
);

// ---------------------------------------------------------------------------
// Refunds

/**
 * REFUND_AWAITING_GOODS: a return: lines of an order that has shipped, refunded once the goods are received
 * back (then REFUND_CREATED); REFUND_CANCELLED: a return whose goods never came (it refunds nothing).
 * REFUND_SUPERSEDED: the provider rejected it (it was REFUND_FAILED), and other refunds have since
 * returned what it would have: retrying it would refund more than was paid or ordered, so nobody waits on it.
 */
export const REFUND_STATUSES = [
  "REFUND_AWAITING_GOODS",
  "REFUND_CREATED",
  "REFUND_PROCESSING",
  "REFUND_SUCCESS",
  "REFUND_FAILED",
  "REFUND_SUPERSEDED",
  "REFUND_CANCELLED",
] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];
/** Refunds in these statuses return nothing and hold nothing back: sums of what was refunded leave them out. */
export const REFUNDS_THAT_RETURN_NOTHING: RefundStatus[] = [
  "REFUND_FAILED",
  "REFUND_SUPERSEDED",
  "REFUND_CANCELLED",
];
/** Refunds owed to the shopper and not yet confirmed: waiting for the goods, to be sent, or sent. */
export const REFUNDS_OWED: RefundStatus[] = ["REFUND_AWAITING_GOODS", "REFUND_CREATED", "REFUND_PROCESSING"];

export const refundOrder = pgTable(
  "refund_order",
  {
    id: uuid().notNull().defaultRandom(),
    /** The order's owner: refund numbers are theirs, one namespace per shopper. */
    userId: shopper(),
    /** The shopper's number for this refund (their key), or a system one under `sys/` that no shopper can make. */
    refundNo: text().notNull(),
    /** The number the provider knows this refund by: one namespace for the whole merchant, never a shopper's input. */
    providerRefundNo: text()
      .notNull()
      .$defaultFn(() => randomUUID()),
    orderId: uuid().notNull(),
    paymentId: uuid().notNull(),
    amountCents: bigint({ mode: "number" }).notNull(),
    currency: text().notNull(),
    status: text({ enum: REFUND_STATUSES }).notNull().default("REFUND_CREATED"),
    /** How many times it was sent: 1, then one more per Retry (REFUND_FAILED → REFUND_CREATED). Part of its ledger keys. */
    attempt: integer().notNull().default(1),
    /**
     * The provider's attempt number for the send it accepted last (a failed refund sent again is a new attempt
     * there): a `refund.failed` about an earlier attempt is stale and changes nothing.
     */
    providerAttempt: integer(),
    /**
     * The send under way (submit.ts): one at a time, so an answer recorded is never crossed by another send's
     * answer the provider gave in between. Free once its answer is recorded, or once `sendUntil` has passed.
     */
    sendClaim: uuid(),
    sendUntil: timestamp({ withTimezone: true }),
    reason: text().notNull().default(""),
    failureReason: text(),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    shopperKey("refund_order_pkey", t),
    toOrder("refund_order_order_fk", t),
    foreignKey({
      name: "refund_order_payment_fk",
      columns: [t.userId, t.paymentId],
      foreignColumns: [paymentOrder.userId, paymentOrder.id],
    }),
    uniqueIndex("refund_order_user_refund_no_uq").on(t.userId, t.refundNo),
    uniqueIndex("refund_order_provider_refund_no_uq").on(t.providerRefundNo),
    index("refund_order_order_idx").on(t.userId, t.orderId),
    index("refund_order_created_idx").on(t.createdAt).where(sql`status = 'REFUND_CREATED'`),
    check("refund_order_amount_positive", sql`${t.amountCents} > 0`),
    inList("refund_order_status_valid", "status", REFUND_STATUSES),
  ],
);

/**
 * The lines a refund gives back (`refunds.create({ lines })`): their stock is returned when it succeeds.
 * A full refund gives back every line without naming them.
 */
export const refundLine = pgTable(
  "refund_line",
  {
    id: identityPart(),
    userId: shopper(),
    refundId: uuid().notNull(),
    orderId: uuid().notNull(),
    skuId: skuRef(),
    quantity: integer().notNull(),
  },
  (t) => [
    shopperKey("refund_line_pkey", t),
    toRefund("refund_line_refund_fk", t),
    toOrder("refund_line_order_fk", t),
    uniqueIndex("refund_line_refund_sku_uq").on(t.userId, t.refundId, t.skuId),
    index("refund_line_order_idx").on(t.userId, t.orderId),
    check("refund_line_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

/**
 * Stock given back by one refund, once per (refund, SKU). An order may get one SKU back in parts (line
 * refunds), never more than was deducted: the stock-return consumer brings what the order holds down to
 * what it still should, under the order's lock.
 */
export const stockReturnRecord = pgTable(
  "stock_return_record",
  {
    id: identityPart(),
    userId: shopper(),
    /** The refund the units went back for; null: reconciliation's repair gave back units that never shipped. */
    refundId: uuid(),
    orderId: uuid().notNull(),
    skuId: skuRef(),
    quantity: integer().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("stock_return_record_pkey", t),
    toRefund("stock_return_record_refund_fk", t),
    toOrder("stock_return_record_order_fk", t),
    uniqueIndex("stock_return_record_refund_sku_uq").on(t.userId, t.refundId, t.skuId),
    index("stock_return_record_order_idx").on(t.userId, t.orderId, t.skuId),
    check("stock_return_record_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

export const benefitReversal = pgTable(
  "benefit_reversal",
  {
    id: identityPart(),
    userId: shopper(),
    orderId: uuid().notNull(),
    refundId: uuid().notNull(),
    benefitType: text({ enum: BENEFIT_TYPES }).notNull(),
    amount: integer().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("benefit_reversal_pkey", t),
    toOrder("benefit_reversal_order_fk", t),
    toRefund("benefit_reversal_refund_fk", t),
    // Points are taken back in steps, one per refund, as the net amount paid falls.
    uniqueIndex("benefit_reversal_refund_type_uq").on(t.userId, t.refundId, t.benefitType),
    // A coupon is revoked once.
    uniqueIndex("benefit_reversal_coupon_uq").on(t.userId, t.orderId).where(sql`benefit_type = 'COUPON'`),
    index("benefit_reversal_order_idx").on(t.userId, t.orderId, t.benefitType),
  ],
);

// ---------------------------------------------------------------------------
// The money ledger (src/server/ledger): double entry, one transfer per movement of money

/**
 * Where a payment's money is, as seen by the merchant. Every transfer takes an amount out of one account and
 * puts it into another (a debit and a credit of the same amount), so the three always add up to zero:
 * - shopper: what the shopper has paid for this payment and not had back, negated (−45.00 while the merchant holds it);
 * - revenue: what the order keeps of it (captured less refunds that took money back or may still do so);
 * - refunds_payable: refunds owed to the shopper and sent, not yet confirmed by the provider.
 */
export const LEDGER_ACCOUNTS = ["shopper", "revenue", "refunds_payable"] as const;
export type LedgerAccount = (typeof LEDGER_ACCOUNTS)[number];

export const ledgerTransfer = pgTable(
  "ledger_transfer",
  {
    id: identityPart(),
    userId: shopper(),
    orderId: uuid().notNull(),
    paymentId: uuid().notNull(),
    /** The refund that moved the money (none for a capture). */
    refundId: uuid(),
    /** The business fact, e.g. `capture:<transaction id>`, `refund:<provider refund no>:<attempt>:owed`: posted once. */
    factKey: text().notNull(),
    fromAccount: text({ enum: LEDGER_ACCOUNTS }).notNull(),
    toAccount: text({ enum: LEDGER_ACCOUNTS }).notNull(),
    amountCents: bigint({ mode: "number" }).notNull(),
    currency: text().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("ledger_transfer_pkey", t),
    toOrder("ledger_transfer_order_fk", t),
    foreignKey({
      name: "ledger_transfer_payment_fk",
      columns: [t.userId, t.paymentId],
      foreignColumns: [paymentOrder.userId, paymentOrder.id],
    }),
    toRefund("ledger_transfer_refund_fk", t),
    uniqueIndex("ledger_transfer_fact_uq").on(t.userId, t.factKey),
    index("ledger_transfer_payment_idx").on(t.userId, t.paymentId),
    index("ledger_transfer_order_idx").on(t.userId, t.orderId),
    check("ledger_transfer_amount_positive", sql`${t.amountCents} > 0`),
    check("ledger_transfer_two_accounts", sql`${t.fromAccount} <> ${t.toAccount}`),
    inList("ledger_transfer_from_valid", "from_account", LEDGER_ACCOUNTS),
    inList("ledger_transfer_to_valid", "to_account", LEDGER_ACCOUNTS),
  ],
);

/**
 * Goods received back for a return (an operator's "received" on /admin, or a carrier's scan), once per
 * (return, SKU): only then does the stock come back and the money go out. `receiptKey` is the scan's own
 * key, so the same scan twice is one receipt.
 */
export const returnReceipt = pgTable(
  "return_receipt",
  {
    id: identityPart(),
    userId: shopper(),
    refundId: uuid().notNull(),
    orderId: uuid().notNull(),
    skuId: skuRef(),
    quantity: integer().notNull(),
    receiptKey: text().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    shopperKey("return_receipt_pkey", t),
    toRefund("return_receipt_refund_fk", t),
    toOrder("return_receipt_order_fk", t),
    uniqueIndex("return_receipt_refund_sku_uq").on(t.userId, t.refundId, t.skuId),
    index("return_receipt_order_idx").on(t.userId, t.orderId, t.skuId),
    check("return_receipt_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

/**
 * What one shipment carried, per SKU: what the order held then, less the lines of refunds still under way
 * (recorded before the shipment, they are not sent). After shipping, what the order holds of stock is what
 * was shipped less what came back.
 */
export const shipmentLine = pgTable(
  "shipment_line",
  {
    id: identityPart(),
    userId: shopper(),
    orderId: uuid().notNull(),
    skuId: skuRef(),
    quantity: integer().notNull(),
  },
  (t) => [
    shopperKey("shipment_line_pkey", t),
    toOrder("shipment_line_order_fk", t),
    uniqueIndex("shipment_line_order_sku_uq").on(t.userId, t.orderId, t.skuId),
    check("shipment_line_quantity_non_negative", sql`${t.quantity} >= 0`),
  ],
);
