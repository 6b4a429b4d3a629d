import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  json,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { createdAt, identity, identityPart, inList } from "./columns";

// What keeps the system running rather than what it sells: the idempotency records, the
// gateway's counters and the event workers' heartbeats.

export const IDEMPOTENCY_STATUSES = ["PROCESSING", "SUCCESS", "FAILED"] as const;
export type IdempotencyStatus = (typeof IDEMPOTENCY_STATUSES)[number];

export const idempotencyRecord = pgTable(
  "idempotency_record",
  {
    id: identityPart(),
    /** Whose key this is (the shopper); keys never match across scopes. */
    userId: text().notNull(),
    bizType: text().notNull(),
    idempotencyKey: text().notNull(),
    /** sha256 of the canonical form of the validated request (docs/idempotency.md). */
    fingerprint: text().notNull(),
    status: text({ enum: IDEMPOTENCY_STATUSES }).notNull().default("PROCESSING"),
    bizId: text(),
    /**
     * Stored outcome: the result on SUCCESS, `{ code, message }` on FAILED. `json`, not `jsonb`: the text is
     * kept as written, so a replay answers the first answer's bytes (jsonb reorders keys).
     */
    responseBody: json(),
    /**
     * The shape of the stored answer: the answer version of the code that claimed (or took over) the key. A
     * replay by code with a newer version reads it through the operation's declared upgrade, or as stored.
     */
    answerVersion: integer().notNull().default(1),
    /** Fencing token: bumped on every takeover; business writes are conditional on it. */
    leaseVersion: integer().notNull().default(1),
    lockedUntil: timestamp({ withTimezone: true }),
    createdAt: createdAt(),
    updatedAt: createdAt(),
    expiresAt: timestamp({ withTimezone: true }).notNull(),
  },
  (t) => [
    // Led by the shopper, the future distribution column (docs/scale-out.md).
    primaryKey({ name: "idempotency_record_pkey", columns: [t.userId, t.id] }),
    uniqueIndex("idempotency_record_user_biz_key_uq").on(t.userId, t.bizType, t.idempotencyKey),
    index("idempotency_record_expires_at_idx").on(t.expiresAt),
    // Leases being held (few at any moment): the alert and reconciliation ask for the stuck ones every 30 s,
    // which without this read the whole table (a million rows in bench scenario 13). Only lease claims set
    // `locked_until`; a one-transaction claim leaves it NULL, and no index names `status`, so that claim's
    // outcome (status, answer) is a HOT update: no new entry in any index (docs/idempotency.md, "The record").
    index("idempotency_record_lease_idx").on(t.lockedUntil).where(sql`locked_until IS NOT NULL`),
    inList("idempotency_record_status_valid", "status", IDEMPOTENCY_STATUSES),
  ],
);

// ---------------------------------------------------------------------------
// Gateway: rate-limit counters shared by every app instance (rate-limiter-flexible's Drizzle store)

export const rateLimit = pgTable("rate_limit", {
  key: text().primaryKey(),
  points: integer().notNull().default(0),
  expire: timestamp({ withTimezone: true }),
});

// ---------------------------------------------------------------------------
// Event workers' heartbeats: a job locked by a worker that stopped beating belonged to a crashed
// process, and is unlocked for the others (graphile-worker alone would wait four hours).

export const workerHeartbeat = pgTable("worker_heartbeat", {
  /** graphile-worker's id of one worker (one per concurrency slot). */
  workerId: text().primaryKey(),
  /** Which process runs it (host:pid), for operators. */
  process: text().notNull(),
  beatAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
});

// ---------------------------------------------------------------------------
// Duplicates absorbed, as data: every request that reached the gateway or the idempotency core with a
// key, and every delivery a consumer got, counted per second and outcome. The order page's story of
// "what happened to this order" is drawn from these rows and from the tables the effects live in.

export const ATTEMPT_LAYERS = ["gateway", "service", "consumer"] as const;
export type AttemptLayer = (typeof ATTEMPT_LAYERS)[number];

export const duplicateAttempt = pgTable(
  "duplicate_attempt",
  {
    layer: text({ enum: ATTEMPT_LAYERS }).notNull(),
    /** The shopper ("" for a gateway refusal that came before the shopper was known). */
    scope: text().notNull(),
    /** The operation (biz type), the gateway's route, or the consumer's name. */
    subject: text().notNull(),
    /** The idempotency key, or the event id a consumer was handed. */
    key: text().notNull(),
    /** first, replayed, waited, conflict, mismatch, rejected (gateway); APPLIED, DUPLICATE, … (consumer). */
    outcome: text().notNull(),
    /**
     * What answered these copies instead of running them, in words: the replay cache, the idempotency record,
     * a unique index by name, a conditional update's FROM state, the consume record ("" for one that took effect).
     */
    absorbedBy: text().notNull().default(""),
    /** The second the attempts arrived in. */
    second: timestamp({ withTimezone: true }).notNull(),
    count: integer().notNull(),
  },
  // Appended, never updated: one row per key, layer, outcome and second in each flush (a second that spans two
  // flushes has two rows; readers sum). Indexed in the order rows arrive (a shopper's, by time), so a write lands
  // at the end of the index. Keyed by the random idempotency key, every row would cost a descent to a random
  // leaf and an upsert's conflict check, on every replay and first execution.
  (t) => [
    index("duplicate_attempt_scope_second_idx").on(t.scope, t.second),
    index("duplicate_attempt_second_brin").using("brin", t.second),
    inList("duplicate_attempt_layer_valid", "layer", ATTEMPT_LAYERS),
  ],
);

/**
 * The attempt log's flushes, by id: a flush appends its rows only when its id is new here, in the same statement,
 * so a flush sent again after its answer was lost (it had committed) appends nothing. Pruned with the rows.
 */
export const attemptFlush = pgTable("attempt_flush", {
  id: uuid().primaryKey(),
  at: timestamp({ withTimezone: true }).notNull().defaultNow(),
});

// ---------------------------------------------------------------------------
// Reconciliation, kept: the event worker runs it once per period and fleet (the first worker to claim the
// period's slot), and every instance's alert log, /admin and /api/metrics read the last one kept, instead of
// each reading every order (src/server/reconciliation/reconcile.ts).

/** incremental: the orders touched since the last run; full: every order; requested: a full run a person asked for. */
export const RECONCILIATION_KINDS = ["incremental", "full", "requested"] as const;
export type ReconciliationKind = (typeof RECONCILIATION_KINDS)[number];

export const reconciliationReport = pgTable(
  "reconciliation_report",
  {
    id: identity(),
    kind: text({ enum: RECONCILIATION_KINDS }).notNull().default("full"),
    /** The period this run is for (epoch seconds / period): one run of each kind per period, whichever worker claims it. */
    slot: bigint({ mode: "number" }).notNull(),
    claimedAt: createdAt(),
    /** When it finished; null while it runs (or if its worker died: the next period runs again). */
    checkedAt: timestamp({ withTimezone: true }),
    /** How long the run took: a full run reads every order (seconds with a million), an incremental one the touched ones. */
    tookMs: integer(),
    /** The orders an incremental run checked (null: a full run checks every order). */
    ordersChecked: integer(),
    /**
     * Every order the violations name (`{ userId, orderId }`, beyond the rows sampled in `invariants`): the next
     * incremental runs check them again, so that a violation stays in the report until it is gone.
     */
    openOrders: jsonb(),
    ok: boolean(),
    /** Each invariant with the violations found and a sample of their rows, as `reconcile()` returns them. */
    invariants: jsonb(),
    /** What the run repaired before it checked (src/server/reconciliation/repair.ts), as `repairWhatIsSafe()` returns it. */
    repairs: jsonb(),
  },
  (t) => [
    uniqueIndex("reconciliation_report_kind_slot_uq").on(t.kind, t.slot),
    index("reconciliation_report_checked_at_idx").on(t.checkedAt),
    inList("reconciliation_report_kind_valid", "kind", RECONCILIATION_KINDS),
  ],
);

/** "Reconcile now" on /admin: at most one full run waits; the next worker to look takes it (deletes the row). */
export const reconciliationRequest = pgTable(
  "reconciliation_request",
  {
    id: integer().primaryKey().default(1),
    requestedAt: createdAt(),
  },
  (t) => [check("reconciliation_request_one", sql`${t.id} = 1`)],
);

/**
 * Every order whose money or goods moved, with when: each table that moves them appends here in a trigger, in
 * the same statement (so a write by hand counts too), and an incremental reconciliation checks the orders
 * touched since the last run. Append-only and in time order, hence a BRIN index; the full run prunes rows older
 * than a day.
 */
export const orderTouch = pgTable(
  "order_touch",
  {
    at: timestamp({ withTimezone: true }).notNull().default(sql`clock_timestamp()`),
    userId: text().notNull(),
    orderId: uuid().notNull(),
  },
  (t) => [index("order_touch_at_brin").using("brin", t.at)],
);
