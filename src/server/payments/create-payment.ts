import { randomBytes } from "node:crypto";
import { and, eq, inArray, sql } from "drizzle-orm";
import type { Db, Executor } from "~/server/db/client";
import { orders, paymentOrder } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import { type IdempotencyConfig, runIdempotent } from "~/server/idempotency";
import { type PayRequest, signPayRequest } from "~/server/provider/contract";

export interface PaymentDeps {
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
  replayed: boolean;
}

const OPEN = ["PENDING", "SUCCESS"] as const;

/**
 * One open payment per order, decided by a partial unique index: calling this
 * again, or many times at once, returns the same payment. The amount always
 * comes from the order.
 */
export async function createPayment(
  db: Executor,
  userId: string,
  input: { orderId: string },
  deps: PaymentDeps,
): Promise<CreatedPayment> {
  const [order] = await db
    .select({
      id: orders.id,
      status: orders.status,
      amountCents: orders.amountCents,
      currency: orders.currency,
    })
    .from(orders)
    .where(and(eq(orders.id, input.orderId), eq(orders.userId, userId)));
  if (!order) throw new DomainError("ORDER_NOT_FOUND", "order not found");
  if (order.status !== "PENDING_PAYMENT") throw notPayable(order.status);

  const [created] = await db
    .insert(paymentOrder)
    .values({
      orderId: order.id,
      outTradeNo: newOutTradeNo(),
      amountCents: order.amountCents,
      currency: order.currency,
    })
    .onConflictDoNothing({ target: paymentOrder.orderId, where: sql`status IN ('PENDING', 'SUCCESS')` })
    .returning();
  const payment =
    created ??
    (
      await db
        .select()
        .from(paymentOrder)
        .where(and(eq(paymentOrder.orderId, order.id), inArray(paymentOrder.status, OPEN)))
    )[0];
  if (!payment) throw new Error("open payment vanished between conflict and read");
  if (payment.status === "SUCCESS") throw notPayable("PAID");
  return {
    outTradeNo: payment.outTradeNo,
    payUrl: payUrl(payment, order.id, deps),
    amountCents: payment.amountCents,
    currency: payment.currency,
    replayed: !created,
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

function payUrl(
  payment: { outTradeNo: string; amountCents: number; currency: string },
  orderId: string,
  deps: PaymentDeps,
): string {
  const params: PayRequest = {
    app_id: deps.appId,
    out_trade_no: payment.outTradeNo,
    amount_cents: payment.amountCents,
    currency: payment.currency,
    notify_url: `${deps.baseUrl}/api/payments/notify`,
    return_url: `/orders/${orderId}`,
    t: Math.floor((deps.now?.() ?? new Date()).getTime() / 1000),
  };
  const query = new URLSearchParams({
    ...Object.fromEntries(Object.entries(params).map(([k, v]) => [k, String(v)])),
    sig: signPayRequest(deps.webhookSecret, params),
  });
  return `/provider/pay/${encodeURIComponent(payment.outTradeNo)}?${query.toString()}`;
}

/**
 * The REST API's POST /orders/{id}/payments: the same one-open-payment rule,
 * behind an Idempotency-Key so a reused key with another order is refused and
 * a replay says so.
 */
export async function createPaymentWithKey(
  db: Db,
  userId: string,
  key: string,
  input: { orderId: string },
  deps: PaymentDeps,
  idempotency: IdempotencyConfig,
) {
  const outcome = await runIdempotent<Omit<CreatedPayment, "replayed">>(
    db,
    {
      scope: userId,
      bizType: "payment.create",
      key,
      request: input,
      storedErrors: ["ORDER_NOT_FOUND", "ORDER_NOT_PAYABLE"],
      execute: async (tx) => {
        const { replayed: _replayed, ...payment } = await createPayment(tx, userId, input, deps);
        return { result: payment, bizId: payment.outTradeNo };
      },
    },
    idempotency,
  );
  return outcome;
}
