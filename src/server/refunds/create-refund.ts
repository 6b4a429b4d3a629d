import { createHash } from "node:crypto";
import { and, eq, ne, sql } from "drizzle-orm";
import type { Db, Executor, Tx } from "~/server/db/client";
import { paymentOrder, refundOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { type IdempotencyConfig, runIdempotent } from "~/server/idempotency";
import { getOwnedOrder } from "~/server/orders/queries";
import type { CreateRefundInput } from "./schema";
import { type RefundDeps, submitRefund } from "./submit";

export interface RefundView {
  refundNo: string;
  status: string;
  amountCents: number;
  currency: string;
  replayed: boolean;
}

/**
 * A shopper's refund: idempotent by refund_no (the same refund_no with another
 * amount or order is refused), never more in total than was paid, then sent to
 * the provider (now if it answers, else by the background submitter).
 */
export async function createRefund(
  db: Db,
  userId: string,
  input: CreateRefundInput,
  deps: RefundDeps,
): Promise<RefundView> {
  await getOwnedOrder(db, userId, input.orderId);
  const recorded = await db.transaction((tx) =>
    recordRefund(tx, { ...input, reason: "requested by the shopper" }),
  );
  const status = await submitRefund(db, input.refundNo, deps).catch(() => recorded.status);
  return { ...recorded, status };
}

/**
 * Records a refund in REFUND_CREATED inside the caller's transaction. The
 * order's successful payment row is locked first, so refunds of one order take
 * turns and their sum cannot be raced past the amount paid.
 */
export async function recordRefund(
  tx: Tx,
  input: CreateRefundInput & { reason: string },
): Promise<RefundView> {
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
  return {
    refundNo: created.refundNo,
    status: created.status,
    amountCents: created.amountCents,
    currency: created.currency,
    replayed: false,
  };
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

function replayOf(
  existing: typeof refundOrder.$inferSelect | undefined,
  input: CreateRefundInput,
): RefundView {
  if (!existing || existing.orderId !== input.orderId || existing.amountCents !== input.amountCents) {
    throw new DomainError(
      "IDEMPOTENCY_KEY_REUSED",
      "This refund_no was already used for another refund. Use a new refund_no for a new refund.",
    );
  }
  return {
    refundNo: existing.refundNo,
    status: existing.status,
    amountCents: existing.amountCents,
    currency: existing.currency,
    replayed: true,
  };
}

/**
 * The REST API's POST /orders/{id}/refunds: the Idempotency-Key decides, and the
 * refund_no is derived from (shopper, key) so two shoppers' keys never collide.
 */
export async function createRefundWithKey(
  db: Db,
  userId: string,
  key: string,
  input: { orderId: string; amountCents: number },
  deps: RefundDeps,
  idempotency: IdempotencyConfig,
) {
  const refundNo = `K-${createHash("sha256").update(`${userId}:${key}`).digest("hex").slice(0, 32)}`;
  const outcome = await runIdempotent<Omit<RefundView, "replayed">>(
    db,
    {
      scope: userId,
      bizType: "refund.create",
      key,
      request: input,
      storedErrors: ["ORDER_NOT_FOUND", "ORDER_NOT_REFUNDABLE", "REFUND_EXCEEDS_PAID"],
      execute: async (tx) => {
        await getOwnedOrder(tx, userId, input.orderId);
        const { replayed: _replayed, ...refund } = await recordRefund(tx, {
          ...input,
          refundNo,
          reason: "requested through the API",
        });
        return { result: refund, bizId: refund.refundNo };
      },
    },
    idempotency,
  );
  // The answer is the stored one (a replay must match it); the provider hears about the refund right after.
  await submitRefund(db, refundNo, deps).catch(() => undefined);
  return outcome;
}
