import { and, eq, inArray, sql } from "drizzle-orm";
import { releaseCoupon } from "~/server/coupons/coupons";
import { absorbedByUpdate, ORDER_MACHINE } from "~/server/db/machines";
import { getOwnedOrder, isOrder, orderIdInput, orderIdParams } from "~/server/db/order-ref";
import { orders, paymentOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { defineOperation, type OperationContext } from "~/server/operations";
import { type CloseDeps, closeOpenPayments } from "~/server/payments/close-payments";
import type { TransactionSteps } from "~/shared/transaction-steps";
import { orderResource } from "./schema";

type CancelContext = OperationContext<{ payments: CloseDeps }>;

/**
 * The cancel's transaction as the model takes it (model/checkout.pml, the shopper's cancel and the timeout):
 * one step, every statement after the order's lock. Its open payments were closed at the provider before it
 * (prepare), each answer applied as a fact of its own.
 */
export const CANCEL_STEPS: TransactionSteps = {
  transaction: "order.cancel",
  path: "an order awaiting payment, its payment closed",
  statements: [
    { does: "lock the order", matches: /from "orders" .*for update/s, step: "close" },
    { does: "a payment opened meanwhile", matches: /from "payment_order"/, step: "close" },
    { does: "PENDING_PAYMENT -> CLOSED", matches: /update "orders"/, step: "close" },
    { does: "its coupon released", matches: /update "coupon_redemption"/, step: "close" },
  ],
};

/**
 * Cancels an unpaid order: PENDING_PAYMENT → CLOSED, once. Its open payments are
 * closed at the provider first, so a shopper confirming at that moment ends in
 * exactly one world: the provider closed the trade (no money can arrive) and the
 * order closes, or the shopper paid first, the order follows its payment, and the
 * cancel answers ORDER_NOT_CANCELLABLE (refund it instead). Cancelling a CLOSED
 * order again answers success. Its coupon, if any, is released.
 */
export const cancelOrderOperation = defineOperation({
  name: "order.cancel",
  input: orderIdInput,
  key: {
    kind: "natural",
    describe: "the order: PENDING_PAYMENT → CLOSED happens once",
    absorbedBy: absorbedByUpdate(ORDER_MACHINE, ORDER_MACHINE.transitions.close, "CLOSED"),
    of: (input) => input.orderId,
  },
  storedErrors: ["ORDER_NOT_FOUND", "ORDER_NOT_CANCELLABLE"],
  gateway: "per-shopper-and-key",
  prepare: async (db, input, { userId, deps }: CancelContext) => {
    const order = await getOwnedOrder(db, userId, input.orderId);
    if (order.status === "PENDING_PAYMENT")
      await closeOpenPayments(db, { userId, orderId: order.orderId }, deps.payments);
  },
  execute: async (tx, input, { userId }: CancelContext) => {
    const [order] = await tx
      .select({ status: orders.status })
      .from(orders)
      .where(isOrder(orders, orders.id, { userId, orderId: input.orderId }))
      .for("update");
    if (!order) throw new DomainError("ORDER_NOT_FOUND", "order not found");
    if (order.status === "PENDING_PAYMENT") {
      // A payment opened after the provider was asked to close the others: close that one too, on a retry.
      const [open] = await tx
        .select({ id: paymentOrder.id })
        .from(paymentOrder)
        .where(
          and(
            isOrder(paymentOrder, paymentOrder.orderId, { userId, orderId: input.orderId }),
            eq(paymentOrder.status, "PENDING"),
          ),
        );
      if (open) {
        throw new DomainError(
          "REQUEST_IN_PROGRESS",
          "a payment of this order was opened meanwhile; retry the cancel with the same key",
          { retryable: true, retryAfterMs: 200 },
        );
      }
    }
    const [closed] = await tx
      .update(orders)
      .set({ status: ORDER_MACHINE.transitions.close.to, updatedAt: sql`now()` })
      .where(
        and(
          isOrder(orders, orders.id, { userId, orderId: input.orderId }),
          inArray(orders.status, ORDER_MACHINE.transitions.close.from),
        ),
      )
      .returning({
        orderId: orders.id,
        status: orders.status,
        amountCents: orders.amountCents,
        currency: orders.currency,
      });
    if (closed) {
      // The coupon it would have spent comes back, in the same transaction as the close.
      await releaseCoupon(tx, { userId, orderId: closed.orderId });
      return { result: closed, bizId: closed.orderId };
    }
    const current = await getOwnedOrder(tx, userId, input.orderId);
    if (current.status !== "CLOSED") {
      throw new DomainError(
        "ORDER_NOT_CANCELLABLE",
        `this order cannot be cancelled: it is ${current.status}; ask for a refund instead`,
        { meta: { status: current.status } },
      );
    }
    const { orderId, status, amountCents, currency } = current;
    return { result: { orderId, status, amountCents, currency }, bizId: orderId, existed: true };
  },
  rest: {
    method: "POST",
    path: "/api/v1/orders/{orderId}/cancel",
    summary: "Cancel an unpaid order (its open payment is closed at the provider first)",
    params: orderIdParams,
    notFound: "ORDER_NOT_FOUND",
    status: 200,
    resource: orderResource,
  },
});
