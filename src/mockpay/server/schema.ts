import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
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

// MockPay's own tables. It shares the database server in development, never a table or a row:
// it talks to the merchant over HTTP only.

const createdAt = () => timestamp({ withTimezone: true }).notNull().defaultNow();
const inList = (name: string, column: string, values: readonly string[]) =>
  check(name, sql.raw(`${column} IN (${values.map((v) => `'${v}'`).join(", ")})`));

// ---------------------------------------------------------------------------
// The mock payment provider: its own tables; it talks to the merchant over HTTP only.

export const PROVIDER_TRADE_STATUSES = ["WAITING", "PAID", "CLOSED"] as const;

export const providerTrade = pgTable(
  "provider_trade",
  {
    id: uuid().primaryKey().defaultRandom(),
    appId: text().notNull(),
    outTradeNo: text().notNull(),
    amountCents: bigint({ mode: "number" }).notNull(),
    currency: text().notNull(),
    notifyUrl: text().notNull(),
    returnUrl: text().notNull(),
    status: text({ enum: PROVIDER_TRADE_STATUSES }).notNull().default("WAITING"),
    transactionId: text(),
    paidAt: timestamp({ withTimezone: true }),
    /** After this the trade can no longer be paid (from the merchant's signed link); Confirm then closes it. */
    expiresAt: timestamp({ withTimezone: true }),
    /** Fault injection: deliveries for this trade are dropped for good. */
    dropNotifications: boolean().notNull().default(false),
    /** The admin's "reject refunds" fault: this many new refund requests on the trade are rejected. */
    rejectRefunds: integer().notNull().default(0),
    /** "Fail refunds after accepting": this many refunds are accepted, then fail (`refund.failed`). */
    failRefunds: integer().notNull().default(0),
    /** "Silent refunds": this many refunds are decided without a notification; only the status query tells. */
    silentRefunds: integer().notNull().default(0),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    uniqueIndex("provider_trade_app_out_trade_no_uq").on(t.appId, t.outTradeNo),
    uniqueIndex("provider_trade_transaction_id_uq").on(t.transactionId),
    // What changed at the provider since a time (the merchant's incremental reconciliation asks).
    index("provider_trade_updated_at_idx").on(t.updatedAt),
    inList("provider_trade_status_valid", "status", PROVIDER_TRADE_STATUSES),
  ],
);

export const PROVIDER_NOTIFICATION_STATUSES = ["PENDING", "DELIVERED", "GAVE_UP"] as const;

export const providerNotification = pgTable(
  "provider_notification",
  {
    /** The notification id: one per business fact, the same on every redelivery. */
    id: text().primaryKey(),
    tradeId: uuid()
      .notNull()
      .references(() => providerTrade.id),
    type: text().notNull(),
    /** The business fact: the type for a payment, `refund.succeeded:<refund_no>` for a refund. */
    factKey: text().notNull(),
    body: jsonb().notNull(),
    status: text({ enum: PROVIDER_NOTIFICATION_STATUSES }).notNull().default("PENDING"),
    attempts: integer().notNull().default(0),
    nextAttemptAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    createdAt: createdAt(),
    deliveredAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    uniqueIndex("provider_notification_trade_fact_uq").on(t.tradeId, t.factKey),
    index("provider_notification_due_idx").on(t.nextAttemptAt).where(sql`status = 'PENDING'`),
    inList("provider_notification_status_valid", "status", PROVIDER_NOTIFICATION_STATUSES),
  ],
);

export const providerDeliveryAttempt = pgTable(
  "provider_delivery_attempt",
  {
    /** The delivery id: new for every attempt. */
    id: uuid().primaryKey().defaultRandom(),
    notificationId: text()
      .notNull()
      .references(() => providerNotification.id),
    attemptNo: integer().notNull(),
    /** SCHEDULED, DUPLICATE, or the fault that was injected. */
    kind: text().notNull(),
    startedAt: createdAt(),
    latencyMs: integer().notNull(),
    httpStatus: integer(),
    responseBody: text(),
    error: text(),
    ok: boolean().notNull(),
  },
  (t) => [index("provider_delivery_attempt_notification_idx").on(t.notificationId, t.startedAt)],
);

export const PROVIDER_REFUND_STATUSES = ["SUCCEEDED", "FAILED"] as const;

/**
 * A refund MockPay accepted: SUCCEEDED (the money went back), or FAILED after it was accepted (the money
 * stays; the same refund_no sent again is a new attempt). `attempts` counts the sends it accepted.
 */
export const providerRefund = pgTable(
  "provider_refund",
  {
    id: uuid().primaryKey().defaultRandom(),
    tradeId: uuid()
      .notNull()
      .references(() => providerTrade.id),
    refundNo: text().notNull(),
    amountCents: bigint({ mode: "number" }).notNull(),
    status: text({ enum: PROVIDER_REFUND_STATUSES }).notNull().default("SUCCEEDED"),
    attempts: integer().notNull().default(1),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    uniqueIndex("provider_refund_trade_refund_no_uq").on(t.tradeId, t.refundNo),
    index("provider_refund_updated_at_idx").on(t.updatedAt),
    inList("provider_refund_status_valid", "status", PROVIDER_REFUND_STATUSES),
  ],
);

/**
 * How MockPay signs what it sends to one merchant endpoint (an app's notify URL): `legacy` (its own
 * `provider-signature` header, docs/provider-contract.md) or `standard` (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature` with the endpoint's keys below, and the spec's retry schedule).
 */
export const PROVIDER_ENDPOINT_FORMATS = ["legacy", "standard"] as const;
/** DISABLED: the endpoint answered 410 Gone; nothing is sent to it until a person enables it again. */
export const PROVIDER_ENDPOINT_STATUSES = ["ENABLED", "DISABLED"] as const;

export const providerEndpoint = pgTable(
  "provider_endpoint",
  {
    id: uuid().primaryKey().defaultRandom(),
    appId: text().notNull(),
    url: text().notNull(),
    format: text({ enum: PROVIDER_ENDPOINT_FORMATS }).notNull().default("legacy"),
    status: text({ enum: PROVIDER_ENDPOINT_STATUSES }).notNull().default("ENABLED"),
    disabledReason: text(),
    /** Told to slow down (429, 502, 504, Retry-After): nothing is sent to it before this. */
    pausedUntil: timestamp({ withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  (t) => [
    uniqueIndex("provider_endpoint_app_url_uq").on(t.appId, t.url),
    inList("provider_endpoint_format_valid", "format", PROVIDER_ENDPOINT_FORMATS),
    inList("provider_endpoint_status_valid", "status", PROVIDER_ENDPOINT_STATUSES),
  ],
);

/** `v1`: HMAC-SHA256 under a `whsec_` secret; `v1a`: ed25519 under a `whsk_` key (its `whpk_` half is public). */
export const PROVIDER_KEY_SCHEMES = ["v1", "v1a"] as const;

/**
 * An endpoint's signing keys. Every key not yet retired signs each delivery, so a rotation (a new key, the old
 * one retiring at the end of an overlap window) lets the merchant take up the new key without missing one.
 */
export const providerEndpointKey = pgTable(
  "provider_endpoint_key",
  {
    id: uuid().primaryKey().defaultRandom(),
    endpointId: uuid()
      .notNull()
      .references(() => providerEndpoint.id),
    scheme: text({ enum: PROVIDER_KEY_SCHEMES }).notNull(),
    /** `whsec_…` (v1) or `whsk_…` (v1a: base64 of the 32-byte ed25519 seed, as in test/vectors). */
    secret: text().notNull(),
    /** `whpk_…` for v1a: what the merchant is given. */
    publicKey: text(),
    createdAt: createdAt(),
    /** Signs until then beside its successor; null while it is the current key. */
    retiresAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    index("provider_endpoint_key_endpoint_idx").on(t.endpointId),
    inList("provider_endpoint_key_scheme_valid", "scheme", PROVIDER_KEY_SCHEMES),
  ],
);
