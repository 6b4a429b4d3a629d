import { randomBytes } from "node:crypto";
import { and, inArray, sql } from "drizzle-orm";
import type { Db, Executor } from "~/server/db/client";
import { PAYMENT_MACHINE } from "~/server/db/machines";
import { isOrder, orderIdInput, orderIdParams } from "~/server/db/order-ref";
import { orders, paymentOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { defineOperation, type OperationContext, runOperation } from "~/server/operations";
import { type PayRequest, signPayRequest } from "~/shared/provider-contract";
import { paymentResource } from "./schema";

export interface PaymentDeps {
  /** How long an order may wait for its payment; its pay link expires then. */
  paymentTimeoutS: number;
  appId: string;
  webhookSecret: string;
  /** This app's public address, where the provider sends notifications. */
  baseUrl: string;
  now?: () => Date;
}

export interface CreatedPayment {
  outTradeNo: string;
  payUrl: string;
  amountCents: number;
  currency: string;
}

const OPEN = ["PENDING", "SUCCESS"] as const;

/**
 * One open payment per order, decided by a partial unique index: asking again,
 * or many times at once, answers the same payment. The amount always comes from
 * the order. Over REST an Idempotency-Key also makes a reused key with another
 * order a 422, and a replay say so.
 */
export const createPaymentOperation = defineOperation({
  name: "payment.create",
  input: orderIdInput,
  key: {
    kind: "natural",
    describe: "the order: one open payment per order (a partial unique index)",
    absorbedBy: "the unique index payment_order_open_per_order_uq (the order's open payment answered)",
    of: (input) => input.orderId,
  },
  storedErrors: ["ORDER_NOT_FOUND", "ORDER_NOT_PAYABLE"],
  gateway: "per-shopper-and-key",
  execute: async (tx, input, { userId, deps }: OperationContext<{ payments: PaymentDeps }>) => {
    const { payment, existed } = await openPayment(tx, userId, input, deps.payments);
    return { result: payment, bizId: payment.outTradeNo, existed };
  },
  rest: {
    method: "POST",
    path: "/api/v1/orders/{orderId}/payments",
    summary: "Open the order's payment at MockPay (one open payment per order)",
    params: orderIdParams,
    notFound: "ORDER_NOT_FOUND",
    status: 201,
    resource: paymentResource,
    location: (_payment, input) => `/api/v1/orders/${input.orderId}`,
  },
});

/** The operation called as a function (tests, the benchmark): no record, the partial unique index decides. */
export function createPayment(db: Db, userId: string, input: { orderId: string }, deps: PaymentDeps) {
  return runOperation(db, createPaymentOperation, { userId, input, deps: { payments: deps } });
}

async function openPayment(
  db: Executor,
  userId: string,
  input: { orderId: string },
  deps: PaymentDeps,
): Promise<{ payment: CreatedPayment; existed: boolean }> {
  const [order] = await db
    .select({
      id: orders.id,
      status: orders.status,
      amountCents: orders.amountCents,
      currency: orders.currency,
      createdAt: orders.createdAt,
    })
    .from(orders)
    .where(isOrder(orders, orders.id, { userId, orderId: input.orderId }))
    // A cancel locks the order to close it: a payment opens before it (and is closed by it) or sees it CLOSED.
    .for("share");
  if (!order) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  if (order.status !== "PENDING_PAYMENT") throw notPayable(order.status);

  const [created] = await db
    .insert(paymentOrder)
    .values({
      userId,
      orderId: order.id,
      outTradeNo: newOutTradeNo(),
      amountCents: order.amountCents,
      currency: order.currency,
      status: PAYMENT_MACHINE.transitions.open.to,
    })
    .onConflictDoNothing({
      target: [paymentOrder.userId, paymentOrder.orderId],
      where: sql`status IN ('PENDING', 'SUCCESS')`,
    })
    .returning();
  const payment =
    created ??
    (
      await db
        .select()
        .from(paymentOrder)
        .where(
          and(
            isOrder(paymentOrder, paymentOrder.orderId, { userId, orderId: order.id }),
            inArray(paymentOrder.status, OPEN),
          ),
        )
    )[0];
  if (!payment) throw new Error("open payment vanished between conflict and read");
  if (payment.status === "SUCCESS") throw notPayable("PAID");
  return {
    payment: {
      outTradeNo: payment.outTradeNo,
      payUrl: payUrl(payment, order, deps),
      amountCents: payment.amountCents,
      currency: payment.currency,
    },
    existed: !created,
  };
}

function notPayable(status: string): DomainError {
  return new DomainError("ORDER_NOT_PAYABLE", `this order cannot be paid: it is ${status}`, {
    meta: { status },
  });
}

function newOutTradeNo(): string {
  return `P${Date.now().toString(36).toUpperCase()}${randomBytes(6).toString("hex").toUpperCase()}`;
}

/**
 * The pay link of a payment. Signed with the payment's own creation time and the order's payment
 * deadline (when the order times out, the link expires), so every answer for one payment (a double
 * click, a retry, a replay) carries the very same link.
 */
function payUrl(
  payment: { outTradeNo: string; amountCents: number; currency: string; createdAt: Date },
  order: { id: string; createdAt: Date },
  deps: PaymentDeps,
): string {
  const params: PayRequest = {
    app_id: deps.appId,
    out_trade_no: payment.outTradeNo,
    amount_cents: payment.amountCents,
    currency: payment.currency,
    notify_url: `${deps.baseUrl}/api/payments/notify`,
    return_url: `/orders/${order.id}`,
    t: Math.floor(payment.createdAt.getTime() / 1000),
    expires_at: Math.ceil(order.createdAt.getTime() / 1000) + deps.paymentTimeoutS,
  };
  const query = new URLSearchParams({
    ...Object.fromEntries(Object.entries(params).map(([k, v]) => [k, String(v)])),
    sig: signPayRequest(deps.webhookSecret, params),
  });
  return `/provider/pay/${encodeURIComponent(payment.outTradeNo)}?${query.toString()}`;
}
