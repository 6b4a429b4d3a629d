import { and, eq } from "drizzle-orm";
import { discountFor, redeem } from "~/server/coupons/coupons";
import { clientOf, type Db, type Tx } from "~/server/db/client";
import { ORDER_MACHINE } from "~/server/db/machines";
import { orders } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { defineOperation, fingerprint, type IdempotencyConfig, runOperation } from "~/server/operations";
import {
  type CreateOrderInput,
  createOrderBody,
  createOrderInput,
  MAX_QUANTITY_PER_LINE,
  type OrderLine,
  orderResource,
} from "./schema";

export interface CreatedOrder {
  orderId: string;
  status: string;
  amountCents: number;
  /** Present when a coupon took something off. */
  discountCents?: number;
  currency: string;
}

/**
 * Places an order exactly once per (shopper, requestId). Unknown SKUs, short
 * stock and a coupon that cannot be spent are final answers: stored and replayed
 * like a success. Stock is checked here and deducted when the order is paid; a
 * coupon is spent here, in the order's transaction.
 */
export const createOrderOperation = defineOperation({
  name: "order.create",
  input: createOrderInput,
  key: {
    kind: "client",
    field: "requestId",
    absorbedBy:
      "the unique index orders_user_id_request_id_uq (the request placed its order before, under a key since expired)",
  },
  storedErrors: [
    "SKU_NOT_FOUND",
    "OUT_OF_STOCK",
    "INVALID_INPUT",
    "COUPON_NOT_FOUND",
    "COUPON_NOT_APPLICABLE",
    "COUPON_ALREADY_USED",
  ],
  gateway: "per-shopper-and-key",
  // Without a coupon the order takes no row lock (the lines are read, not locked; the order's unique key is the
  // request id, the record's key): it may share a transaction with other orders. A coupon's redemption locks it.
  batchable: (input) => !input.couponCode,
  // The same lines in another order, or split over two entries, are the same request.
  canonical: (input) => canonicalOrderRequest(normaliseLines(input.items), input.couponCode),
  execute: async (tx, input, { userId }) => {
    const { order, existed } = await insertOrder(
      tx,
      userId,
      input.requestId,
      normaliseLines(input.items),
      input.couponCode,
    );
    return { result: order, bizId: order.orderId, existed };
  },
  rest: {
    method: "POST",
    path: "/api/v1/orders",
    summary: "Place an order (once per Idempotency-Key)",
    body: createOrderBody,
    status: 201,
    resource: orderResource,
    location: (order) => `/api/v1/orders/${order.orderId}`,
  },
});

/** The operation called as a function (tests, the benchmark). */
export function createOrder(
  db: Db,
  userId: string,
  input: CreateOrderInput,
  deps: { idempotency?: IdempotencyConfig } = {},
) {
  return runOperation(db, createOrderOperation, { userId, input, deps: {} }, deps.idempotency);
}

/** One line per SKU, in SKU order: the canonical form that is fingerprinted and stored. */
export function normaliseLines(items: readonly OrderLine[]): OrderLine[] {
  const quantities = new Map<string, number>();
  for (const { skuId, quantity } of items) {
    quantities.set(skuId, (quantities.get(skuId) ?? 0) + quantity);
  }
  return [...quantities.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([skuId, quantity]) => {
      if (quantity > MAX_QUANTITY_PER_LINE) {
        throw new DomainError(
          "INVALID_INPUT",
          `quantity of ${skuId} must be at most ${MAX_QUANTITY_PER_LINE}`,
        );
      }
      return { skuId, quantity };
    });
}

/** What "the same order request" means: its lines (normalised) and its coupon, not its key. */
function canonicalOrderRequest(items: OrderLine[], couponCode?: string) {
  return couponCode ? { items, couponCode } : { items };
}

/**
 * Inserts the order once per (shopper, request id). The order keeps its request's fingerprint, the one the
 * idempotency core takes: the business key outlives the idempotency record, so a request id used again
 * after its record expired is answered with its order only when it is the same request.
 */
export async function insertOrder(
  tx: Tx,
  userId: string,
  requestId: string,
  lines: OrderLine[],
  couponCode?: string,
): Promise<{ order: CreatedOrder; existed: boolean }> {
  const requestFingerprint = fingerprint(createOrderOperation.name, canonicalOrderRequest(lines, couponCode));
  const sql = clientOf(tx);
  // A request id that placed its order is answered with it whatever changed since (its last unit sold, its
  // coupon spent, by this very order maybe): a refusal is for a request that placed none.
  const placedBefore = () => existingOrderForRequest(tx, userId, requestId, requestFingerprint);
  // A coupon's discount depends on the lines' total: read the lines first (and refuse what cannot be placed).
  let discountCents = 0;
  if (couponCode) {
    try {
      discountCents = (
        await discountFor(tx, userId, couponCode, subtotalOf(refusal(await linesOf(sql, lines))))
      ).discountCents;
    } catch (error) {
      const order = error instanceof DomainError ? await placedBefore() : undefined;
      if (order) return { order, existed: true };
      throw error;
    }
  }
  // The order and its lines in one statement, checked as it runs: every SKU known, in stock, one currency.
  const [placed] = await sql<{ order: CreatedOrder | null; lines: PricedLine[] }[]>`
    WITH line AS (
      SELECT wanted.sku_id AS "skuId", wanted.quantity, sku.name, sku.price_cents AS "priceCents",
             sku.currency, sku.stock, wanted.n
        FROM unnest(${lines.map((line) => line.skuId)}::text[], ${lines.map((line) => line.quantity)}::int[])
             WITH ORDINALITY AS wanted(sku_id, quantity, n)
        LEFT JOIN sku ON sku.id = wanted.sku_id
    ), verdict AS (
      SELECT bool_and(name IS NOT NULL AND stock >= quantity) AND count(DISTINCT currency) <= 1 AS ok,
             sum("priceCents"::int8 * quantity) AS subtotal, min(currency) AS currency
        FROM line
    ), placed AS (
      INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, discount_cents, currency, status)
      SELECT ${userId}::text, ${requestId}, ${requestFingerprint}, subtotal - ${discountCents}::int,
             ${discountCents}::int, currency, ${ORDER_MACHINE.transitions.place.to}
        FROM verdict WHERE ok
      ON CONFLICT (user_id, request_id) DO NOTHING
      RETURNING id, status, amount_cents, discount_cents, currency
    ), items AS (
      INSERT INTO order_item (user_id, order_id, sku_id, sku_name, quantity, unit_price_cents, line_total_cents)
      SELECT ${userId}::text, placed.id, line."skuId", line.name, line.quantity, line."priceCents",
             line."priceCents"::int8 * line.quantity
        FROM placed, line
    )
    SELECT (SELECT json_build_object('orderId', id, 'status', status, 'amountCents', amount_cents,
                                     'discountCents', discount_cents, 'currency', currency) FROM placed) AS order,
           (SELECT json_agg(line ORDER BY n) FROM line) AS lines`;
  if (!placed?.order) {
    // Not placed: the request id already placed an order, or a line it cannot have.
    const order = await placedBefore();
    if (order) return { order, existed: true };
    refusal(placed?.lines ?? []);
    throw new Error("an order neither placed nor refused");
  }
  if (couponCode) {
    await redeem(tx, { code: couponCode, userId, orderId: placed.order.orderId, discountCents });
  }
  return { order: answerOf(placed.order), existed: false };
}

interface PricedLine {
  skuId: string;
  quantity: number;
  /** Null: no such SKU. */
  name: string | null;
  priceCents: number;
  currency: string;
  stock: number;
}

/** The order's lines as the catalogue prices them (for a coupon, whose discount depends on their total). */
function linesOf(sql: ReturnType<typeof clientOf>, lines: OrderLine[]) {
  return sql<PricedLine[]>`
    SELECT wanted.sku_id AS "skuId", wanted.quantity, sku.name, sku.price_cents AS "priceCents", sku.currency,
           sku.stock
      FROM unnest(${lines.map((line) => line.skuId)}::text[], ${lines.map((line) => line.quantity)}::int[])
           WITH ORDINALITY AS wanted(sku_id, quantity, n)
      LEFT JOIN sku ON sku.id = wanted.sku_id
     ORDER BY wanted.n`;
}

/** Throws the first reason an order of these lines cannot be placed, in line order; else gives the lines back. */
function refusal(lines: PricedLine[]): PricedLine[] {
  for (const line of lines) {
    if (line.name === null) {
      throw new DomainError("SKU_NOT_FOUND", `unknown SKU ${line.skuId}`, { meta: { skuId: line.skuId } });
    }
    if (line.stock < line.quantity) {
      throw new DomainError("OUT_OF_STOCK", `only ${line.stock} of ${line.name} left`, {
        meta: { skuId: line.skuId, available: line.stock, requested: line.quantity },
      });
    }
  }
  if (new Set(lines.map((line) => line.currency)).size > 1) {
    throw new DomainError("INVALID_INPUT", "all items of an order must share one currency");
  }
  return lines;
}

function subtotalOf(lines: PricedLine[]): number {
  return lines.reduce((sum, line) => sum + line.priceCents * line.quantity, 0);
}

const createdColumns = {
  orderId: orders.id,
  status: orders.status,
  amountCents: orders.amountCents,
  discountCents: orders.discountCents,
  currency: orders.currency,
};

/** An order without a coupon answers without discountCents: answers stored before coupons existed keep their bytes. */
function answerOf({ discountCents, ...order }: CreatedOrder): CreatedOrder {
  return discountCents ? { ...order, discountCents } : order;
}

/**
 * The business key outlives the idempotency record (which expires): a request id
 * that already made an order answers with that order, never a second one, and only
 * when it is the same request (its fingerprint, not merely its total). Undefined: it made none.
 */
async function existingOrderForRequest(
  tx: Tx,
  userId: string,
  requestId: string,
  requestFingerprint: string,
): Promise<CreatedOrder | undefined> {
  const [existing] = await tx
    .select({ ...createdColumns, requestFingerprint: orders.requestFingerprint })
    .from(orders)
    .where(and(eq(orders.userId, userId), eq(orders.requestId, requestId)));
  if (!existing) return undefined;
  const { requestFingerprint: kept, ...order } = existing;
  if (kept !== requestFingerprint) {
    throw new DomainError(
      "IDEMPOTENCY_KEY_REUSED",
      "This request id already placed a different order. Use a new key for a new order.",
    );
  }
  return answerOf(order);
}
