import { createHash } from "node:crypto";
import { and, eq, ne, sql } from "drizzle-orm";
import type { Executor, Tx } from "~/server/db/client";
import { paymentOrder, refundOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { defineOperation, type OperationContext } from "~/server/idempotency";
import { getOwnedOrder } from "~/server/orders/queries";
import { orderIdParams } from "~/server/orders/schema";
import { type CreateRefundInput, createRefundBody, createRefundInput, refundResource } from "./schema";
import { type RefundDeps, submitRefund } from "./submit";

export interface RefundView {
  refundNo: string;
  status: string;
  amountCents: number;
  currency: string;
}

type RefundContext = OperationContext<{ payments: RefundDeps }>;

/**
 * A shopper's refund: once per refund_no (the same refund_no with another amount
 * or order is refused), never more in total than was paid, then sent to the
 * provider (now if it answers, else by the background submitter).
 */
export const createRefundOperation = defineOperation({
  name: "refund.create",
  input: createRefundInput,
  key: {
    kind: "client",
    field: "refundNo",
    // refund_no is one namespace for every shopper: a REST key is hashed with its shopper into one.
    fromHeader: (userId, key) =>
      `K-${createHash("sha256").update(`${userId}:${key}`).digest("hex").slice(0, 32)}`,
  },
  storedErrors: ["ORDER_NOT_FOUND", "ORDER_NOT_REFUNDABLE", "REFUND_EXCEEDS_PAID"],
  gateway: "per-shopper-and-key",
  execute: async (tx, input, { userId }: RefundContext) => {
    await getOwnedOrder(tx, userId, input.orderId);
    const { refund, existed } = await recordRefund(tx, { ...input, reason: "requested by the shopper" });
    return { result: refund, bizId: refund.refundNo, existed };
  },
  // The answer is the stored one (a replay must match it); the provider hears about the refund right after.
  afterCommit: async (db, refund, { deps }: RefundContext) => {
    await submitRefund(db, refund.refundNo, deps.payments);
  },
  rest: {
    method: "POST",
    path: "/api/v1/orders/{orderId}/refunds",
    summary: "Refund (part of) a paid order; never more than was paid in total",
    params: orderIdParams,
    notFound: "ORDER_NOT_FOUND",
    body: createRefundBody,
    status: 201,
    resource: refundResource,
    location: (_refund, input) => `/api/v1/orders/${input.orderId}`,
  },
});

/**
 * Records a refund in REFUND_CREATED inside the caller's transaction. The
 * order's successful payment row is locked first, so refunds of one order take
 * turns and their sum cannot be raced past the amount paid.
 */
export async function recordRefund(
  tx: Tx,
  input: CreateRefundInput & { reason: string },
): Promise<{ refund: RefundView; existed: boolean }> {
  const payment = await lockPaidPayment(tx, input.orderId);
  if (!payment)
    throw new DomainError("ORDER_NOT_REFUNDABLE", "this order has no successful payment to refund");

  const existing = await findRefund(tx, input.refundNo);
  if (existing) return replayOf(existing, input);

  const [refunded] = await tx
    .select({ total: sql<string>`coalesce(sum(${refundOrder.amountCents}), 0)` })
    .from(refundOrder)
    .where(and(eq(refundOrder.paymentId, payment.id), ne(refundOrder.status, "REFUND_FAILED")));
  const already = Number(refunded?.total ?? 0);
  if (already + input.amountCents > payment.amountCents) {
    throw new DomainError(
      "REFUND_EXCEEDS_PAID",
      `at most ${payment.amountCents - already} cents can still be refunded`,
      { meta: { paidCents: payment.amountCents, refundedCents: already } },
    );
  }
  const [created] = await tx
    .insert(refundOrder)
    .values({
      refundNo: input.refundNo,
      orderId: input.orderId,
      paymentId: payment.id,
      amountCents: input.amountCents,
      currency: payment.currency,
      reason: input.reason,
    })
    .onConflictDoNothing({ target: refundOrder.refundNo })
    .returning();
  // Another order took this refund_no at the same moment: the unique index decided.
  if (!created) return replayOf(await findRefund(tx, input.refundNo), input);
  return { refund: viewOf(created), existed: false };
}

/**
 * The order's successful payment, locked until the transaction ends: everything that decides how much of
 * an order is refunded takes this lock first, so those decisions take turns.
 */
export async function lockPaidPayment(tx: Tx, orderId: string) {
  const [payment] = await tx
    .select()
    .from(paymentOrder)
    .where(and(eq(paymentOrder.orderId, orderId), eq(paymentOrder.status, "SUCCESS")))
    .for("update");
  return payment;
}

async function findRefund(db: Executor, refundNo: string) {
  const [row] = await db.select().from(refundOrder).where(eq(refundOrder.refundNo, refundNo));
  return row;
}

function viewOf(row: typeof refundOrder.$inferSelect): RefundView {
  return { refundNo: row.refundNo, status: row.status, amountCents: row.amountCents, currency: row.currency };
}

function replayOf(
  existing: typeof refundOrder.$inferSelect | undefined,
  input: CreateRefundInput,
): { refund: RefundView; existed: boolean } {
  if (!existing || existing.orderId !== input.orderId || existing.amountCents !== input.amountCents) {
    throw new DomainError(
      "IDEMPOTENCY_KEY_REUSED",
      "This refund_no was already used for another refund. Use a new refund_no for a new refund.",
    );
  }
  return { refund: viewOf(existing), existed: true };
}
