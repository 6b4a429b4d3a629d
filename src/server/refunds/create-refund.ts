import { and, asc, eq, inArray, notInArray, sql } from "drizzle-orm";
import { couponEarnedBy, revokeCoupon } from "~/server/coupons/coupons";
import type { Executor, Tx } from "~/server/db/client";
import { REFUND_MACHINE } from "~/server/db/machines";
import { getOwnedOrder, isOrder, type OrderRef, orderIdParams } from "~/server/db/order-ref";
import {
  orderItem,
  orders,
  paymentOrder,
  REFUNDS_THAT_RETURN_NOTHING,
  refundLine,
  refundOrder,
  shipment,
} from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { postRefundMove, refundableOf } from "~/server/ledger/ledger";
import { defineOperation, type OperationContext } from "~/server/operations";
import { normaliseLines } from "~/server/orders/create-order";
import type { OrderLine } from "~/server/orders/schema";
import { type CreateRefundInput, createRefundBody, createRefundInput, refundResource } from "./schema";
import { type RefundDeps, submitRefund } from "./submit";
import { restateRejectedRefunds } from "./transitions";

export interface RefundView {
  refundNo: string;
  status: string;
  amountCents: number;
  currency: string;
  /** Present when the refund names lines (their stock returns when it succeeds). */
  lines?: OrderLine[];
}

type RefundContext = OperationContext<{ payments: RefundDeps }>;

/**
 * A shopper's refund: once per refund_no (the same refund_no with another amount,
 * lines or order is refused), never more in total than was paid, never a line
 * more than was ordered, then sent to the provider (now if it answers, else by the
 * background submitter).
 */
export const createRefundOperation = defineOperation({
  name: "refund.create",
  input: createRefundInput,
  // Refund numbers are the shopper's own (unique per shopper): a REST Idempotency-Key is the refund number.
  key: {
    kind: "client",
    field: "refundNo",
    absorbedBy:
      "the unique index refund_order_user_refund_no_uq (the refund was recorded before, under a key since expired)",
  },
  storedErrors: ["ORDER_NOT_FOUND", "ORDER_NOT_REFUNDABLE", "REFUND_EXCEEDS_PAID", "REFUND_LINES_INVALID"],
  gateway: "per-shopper-and-key",
  // The same lines in another order, or split over two entries, are the same refund.
  canonical: ({ refundNo: _key, lines, ...rest }) =>
    lines ? { ...rest, lines: normaliseLines(lines) } : rest,
  execute: async (tx, input, { userId }: RefundContext) => {
    await getOwnedOrder(tx, userId, input.orderId);
    const { refund, existed } = await recordRefund(tx, {
      ...input,
      userId,
      reason: "requested by the shopper",
      couponRule: true,
    });
    return { result: refund, bizId: refund.refundNo, existed };
  },
  // The answer is the stored one (a replay must match it); the provider hears about the refund right after.
  afterCommit: async (db, refund, { userId, deps }: RefundContext) => {
    const row = await findRefund(db, userId, refund.refundNo);
    if (row) await submitRefund(db, row.providerRefundNo, deps.payments);
  },
  rest: {
    method: "POST",
    path: "/api/v1/orders/{orderId}/refunds",
    summary:
      "Refund (part of) a paid order, by amount or by lines; never more than was paid, nor a line more than was ordered",
    params: orderIdParams,
    notFound: "ORDER_NOT_FOUND",
    body: createRefundBody,
    status: 201,
    resource: refundResource,
    location: (_refund, input) => `/api/v1/orders/${input.orderId}`,
  },
});

/**
 * Records a refund in REFUND_CREATED inside the caller's transaction, under the
 * order owner's refund number (`userId` is the order's owner: the shopper, or the
 * order's for a system refund under `sys/`). The order's successful payment row is
 * locked first, so refunds of one order take turns and neither their sum nor their
 * lines can be raced past what was paid and ordered.
 */
export async function recordRefund(
  tx: Tx,
  input: CreateRefundInput & {
    userId: string;
    reason: string;
    /** A shopper's refund: the coupon the order earned is revoked, or (spent) its value held back. */
    couponRule?: boolean;
  },
): Promise<{ refund: RefundView; existed: boolean }> {
  const payment = await lockPaidPayment(tx, input);
  if (!payment)
    throw new DomainError("ORDER_NOT_REFUNDABLE", "this order has no successful payment to refund");
  const lines = input.lines ? normaliseLines(input.lines) : undefined;

  const existing = await findRefund(tx, input.userId, input.refundNo);
  if (existing) return replayOf(tx, existing, input, lines);

  // Then the order's, as fulfilment takes it: a refund and the shipment take turns, so "has it shipped" holds.
  const shipped = await lockOrderAndTellShipped(tx, input);
  const amountCents = lines
    ? await priceLines(tx, input, lines, input.amountCents)
    : (input.amountCents ?? 0);
  // What is left to refund is what the order keeps of the payment: the ledger's revenue balance.
  const refundable = await refundableOf(tx, payment);
  if (amountCents > refundable) {
    throw new DomainError("REFUND_EXCEEDS_PAID", `at most ${refundable} cents can still be refunded`, {
      meta: { paidCents: payment.amountCents, refundedCents: payment.amountCents - refundable },
    });
  }
  const coupon = input.couponRule ? await couponAtStake(tx, input, refundable, amountCents) : undefined;
  // Lines of an order that has shipped are a return: refunded once the goods are back.
  const { to: status } =
    lines && shipped ? REFUND_MACHINE.transitions.askReturn : REFUND_MACHINE.transitions.record;
  const [created] = await tx
    .insert(refundOrder)
    .values({
      userId: input.userId,
      refundNo: input.refundNo,
      orderId: input.orderId,
      paymentId: payment.id,
      amountCents,
      currency: payment.currency,
      status,
      reason: input.reason,
      // Read under the order's lock, as the shipment's is: "recorded after it shipped" means what happened first.
      createdAt: sql`clock_timestamp()`,
    })
    .onConflictDoNothing({ target: [refundOrder.userId, refundOrder.refundNo] })
    .returning();
  // The shopper used this refund_no for another order at the same moment: the unique index decided.
  if (!created) {
    const winner = await findRefund(tx, input.userId, input.refundNo);
    if (!winner) throw new Error("refund vanished between conflict and read");
    return replayOf(tx, winner, input, lines);
  }
  await postRefundMove(tx, { ...created, paymentId: payment.id }, "NEW", status);
  // What the order keeps falls below the coupon it earned: the coupon, unspent, is revoked with this refund.
  if (coupon) await revokeCoupon(tx, input, created.id);
  if (lines) {
    await tx.insert(refundLine).values(
      lines.map((line) => ({
        userId: input.userId,
        refundId: created.id,
        orderId: input.orderId,
        ...line,
      })),
    );
  }
  // A rejected refund of this order that this one leaves no room for can never be retried: say so now.
  await restateRejectedRefunds(tx, payment, `refund ${input.refundNo} returned what it would have`);
  return { refund: viewOf(created, lines), existed: false };
}

/** Locks the order (after its payment, as every refund decision does) and tells whether it has shipped. */
async function lockOrderAndTellShipped(tx: Tx, order: OrderRef): Promise<boolean> {
  await tx
    .select({ id: orders.id })
    .from(orders)
    .where(isOrder(orders, orders.id, order))
    .for("update");
  const [sent] = await tx
    .select({ id: shipment.id })
    .from(shipment)
    .where(isOrder(shipment, shipment.orderId, order));
  return sent !== undefined;
}

/**
 * The coupon this order earned, when what the order would keep after the refund falls below its value (the
 * coupon was earned by paying for more than it gives): unspent, it is to be revoked with the refund; spent
 * on another order, its value is held back from the refund (REFUND_EXCEEDS_PAID says how much is left).
 */
async function couponAtStake(tx: Tx, order: OrderRef, refundable: number, amountCents: number) {
  const coupon = await couponEarnedBy(tx, order);
  if (!coupon || coupon.revoked || refundable - amountCents >= coupon.valueCents) return undefined;
  if (coupon.spent) {
    const most = Math.max(0, refundable - coupon.valueCents);
    throw new DomainError(
      "REFUND_EXCEEDS_PAID",
      `the coupon this order earned (${coupon.valueCents} cents) was spent on another order, so its value stays with this one: at most ${most} cents can still be refunded`,
      { meta: { couponCode: coupon.code, couponCents: coupon.valueCents, refundableCents: most } },
    );
  }
  return coupon;
}

/**
 * Checks the lines against what the order holds (ordered, less what refunds that did not fail
 * already named) and prices them: what they were paid, their share of a coupon taken off. An amount
 * named beside them must be that price.
 */
async function priceLines(
  tx: Tx,
  order: OrderRef,
  lines: OrderLine[],
  amountCents?: number,
): Promise<number> {
  const items = await tx
    .select({
      skuId: orderItem.skuId,
      quantity: orderItem.quantity,
      unitPriceCents: orderItem.unitPriceCents,
    })
    .from(orderItem)
    .where(isOrder(orderItem, orderItem.orderId, order));
  const named = await tx
    .select({ skuId: refundLine.skuId, quantity: sql<string>`sum(${refundLine.quantity})` })
    .from(refundLine)
    .innerJoin(
      refundOrder,
      and(eq(refundOrder.userId, refundLine.userId), eq(refundOrder.id, refundLine.refundId)),
    )
    .where(
      and(
        isOrder(refundLine, refundLine.orderId, order),
        notInArray(refundOrder.status, REFUNDS_THAT_RETURN_NOTHING),
      ),
    )
    .groupBy(refundLine.skuId);
  const alreadyNamed = new Map(named.map((row) => [row.skuId, Number(row.quantity)]));
  const bySku = new Map(items.map((item) => [item.skuId, item]));
  let value = 0;
  for (const line of lines) {
    const item = bySku.get(line.skuId);
    if (!item) {
      throw new DomainError("REFUND_LINES_INVALID", `${line.skuId} is not in this order`, {
        meta: { skuId: line.skuId },
      });
    }
    const left = item.quantity - (alreadyNamed.get(line.skuId) ?? 0);
    if (line.quantity > left) {
      throw new DomainError("REFUND_LINES_INVALID", `only ${left} of ${line.skuId} are left to refund`, {
        meta: { skuId: line.skuId, left },
      });
    }
    value += item.unitPriceCents * line.quantity;
  }
  const [priced] = await tx
    .select({ amountCents: orders.amountCents, discountCents: orders.discountCents })
    .from(orders)
    .where(isOrder(orders, orders.id, order));
  if (!priced) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  const subtotal = priced.amountCents + priced.discountCents;
  const paid = Math.floor((value * priced.amountCents) / subtotal);
  // Lines are refunded at what they were paid, never at a number beside them.
  if (amountCents !== undefined && amountCents !== paid) {
    throw new DomainError(
      "REFUND_LINES_INVALID",
      `these lines were paid ${paid} cents: leave the amount out, or name that amount`,
      { meta: { linesCents: paid } },
    );
  }
  return paid;
}

/**
 * The order's successful payment, locked until the transaction ends: everything that decides how much of
 * an order is refunded takes this lock first, so those decisions take turns.
 */
export async function lockPaidPayment(tx: Tx, order: OrderRef) {
  const [payment] = await tx
    .select()
    .from(paymentOrder)
    .where(and(isOrder(paymentOrder, paymentOrder.orderId, order), eq(paymentOrder.status, "SUCCESS")))
    .for("update");
  return payment;
}

async function findRefund(db: Executor, userId: string, refundNo: string) {
  const [row] = await db
    .select()
    .from(refundOrder)
    .where(and(eq(refundOrder.userId, userId), eq(refundOrder.refundNo, refundNo)));
  return row;
}

/** The lines each of these refunds names, by refund id. */
export async function refundLinesOf(db: Executor, userId: string, refundIds: string[]) {
  if (refundIds.length === 0) return new Map<string, OrderLine[]>();
  const rows = await db
    .select({ refundId: refundLine.refundId, skuId: refundLine.skuId, quantity: refundLine.quantity })
    .from(refundLine)
    .where(and(eq(refundLine.userId, userId), inArray(refundLine.refundId, refundIds)))
    .orderBy(asc(refundLine.skuId));
  const byRefund = new Map<string, OrderLine[]>();
  for (const { refundId, ...line } of rows) byRefund.set(refundId, [...(byRefund.get(refundId) ?? []), line]);
  return byRefund;
}

function viewOf(row: typeof refundOrder.$inferSelect, lines?: OrderLine[]): RefundView {
  const view = {
    refundNo: row.refundNo,
    status: row.status,
    amountCents: row.amountCents,
    currency: row.currency,
  };
  return lines?.length ? { ...view, lines } : view;
}

async function replayOf(
  db: Executor,
  existing: typeof refundOrder.$inferSelect,
  input: CreateRefundInput,
  lines: OrderLine[] | undefined,
): Promise<{ refund: RefundView; existed: boolean }> {
  const stored = (await refundLinesOf(db, existing.userId, [existing.id])).get(existing.id);
  const sameLines = JSON.stringify(stored ?? null) === JSON.stringify(lines ?? null);
  const sameAmount = input.amountCents === undefined || input.amountCents === existing.amountCents;
  if (existing.orderId !== input.orderId || !sameAmount || !sameLines) {
    throw new DomainError(
      "IDEMPOTENCY_KEY_REUSED",
      "This refund_no was already used for another refund. Use a new refund_no for a new refund.",
    );
  }
  return { refund: viewOf(existing, stored), existed: true };
}
