import { sql } from "drizzle-orm";
import {
  bigint,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";

const createdAt = () => timestamp({ withTimezone: true }).notNull().defaultNow();

export const sku = pgTable(
  "sku",
  {
    id: text().primaryKey(),
    name: text().notNull(),
    description: text().notNull().default(""),
    priceCents: integer().notNull(),
    currency: text().notNull().default("USD"),
    stock: integer().notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    check("sku_price_non_negative", sql`${t.priceCents} >= 0`),
    check("sku_stock_non_negative", sql`${t.stock} >= 0`),
  ],
);

export const ORDER_STATUSES = ["PENDING_PAYMENT", "PAID", "SHIPPED", "CLOSED", "REFUNDED"] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export const orders = pgTable(
  "orders",
  {
    id: uuid().primaryKey().defaultRandom(),
    userId: text().notNull(),
    requestId: text().notNull(),
    amountCents: bigint({ mode: "number" }).notNull(),
    currency: text().notNull().default("USD"),
    status: text({ enum: ORDER_STATUSES }).notNull().default("PENDING_PAYMENT"),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    uniqueIndex("orders_user_id_request_id_uq").on(t.userId, t.requestId),
    index("orders_user_id_created_at_idx").on(t.userId, t.createdAt),
    check("orders_amount_non_negative", sql`${t.amountCents} >= 0`),
    check("orders_status_valid", sql.raw(`status IN (${ORDER_STATUSES.map((s) => `'${s}'`).join(", ")})`)),
  ],
);

export const orderItem = pgTable(
  "order_item",
  {
    id: uuid().primaryKey().defaultRandom(),
    orderId: uuid()
      .notNull()
      .references(() => orders.id, { onDelete: "cascade" }),
    skuId: text()
      .notNull()
      .references(() => sku.id),
    skuName: text().notNull(),
    quantity: integer().notNull(),
    unitPriceCents: integer().notNull(),
    lineTotalCents: bigint({ mode: "number" }).notNull(),
  },
  (t) => [
    uniqueIndex("order_item_order_id_sku_id_uq").on(t.orderId, t.skuId),
    check("order_item_quantity_positive", sql`${t.quantity} > 0`),
  ],
);

export const IDEMPOTENCY_STATUSES = ["PROCESSING", "SUCCESS", "FAILED"] as const;
export type IdempotencyStatus = (typeof IDEMPOTENCY_STATUSES)[number];

export const idempotencyRecord = pgTable(
  "idempotency_record",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    /** Whose key this is (the shopper); keys never match across scopes. */
    userId: text().notNull(),
    bizType: text().notNull(),
    idempotencyKey: text().notNull(),
    /** sha256 of the canonical form of the validated request (docs/idempotency.md). */
    fingerprint: text().notNull(),
    status: text({ enum: IDEMPOTENCY_STATUSES }).notNull().default("PROCESSING"),
    bizId: text(),
    /** Stored outcome: the result on SUCCESS, `{ code, message }` on FAILED. */
    responseBody: jsonb(),
    /** Fencing token: bumped on every takeover; business writes are conditional on it. */
    leaseVersion: integer().notNull().default(1),
    lockedUntil: timestamp({ withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: createdAt(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
  },
  (t) => [
    uniqueIndex("idempotency_record_user_biz_key_uq").on(t.userId, t.bizType, t.idempotencyKey),
    index("idempotency_record_expires_at_idx").on(t.expiresAt),
    check(
      "idempotency_record_status_valid",
      sql.raw(`status IN (${IDEMPOTENCY_STATUSES.map((s) => `'${s}'`).join(", ")})`),
    ),
  ],
);
