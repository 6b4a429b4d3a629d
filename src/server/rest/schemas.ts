import { z } from "zod";
import { createOrderInput } from "~/server/orders/schema";
import { createRefundInput } from "~/server/refunds/schema";

/** Request bodies: the same zod schemas the services validate with (the key travels in the header). */
export const createOrderBody = z
  .object({ items: createOrderInput.shape.items })
  .meta({ id: "CreateOrderRequest" });
export const createRefundBody = z
  .object({ amountCents: createRefundInput.shape.amountCents })
  .meta({ id: "CreateRefundRequest" });

export const orderResource = z
  .object({
    orderId: z.uuid(),
    status: z.string(),
    amountCents: z.number().int(),
    currency: z.string(),
  })
  .meta({ id: "Order" });

export const paymentResource = z
  .object({
    outTradeNo: z.string(),
    payUrl: z.string(),
    amountCents: z.number().int(),
    currency: z.string(),
  })
  .meta({ id: "Payment" });

export const refundResource = z
  .object({
    refundNo: z.string(),
    status: z.string(),
    amountCents: z.number().int(),
    currency: z.string(),
  })
  .meta({ id: "Refund" });

export const orderDetails = orderResource
  .extend({
    requestId: z.string(),
    createdAt: z.string(),
    items: z.array(
      z.object({
        skuId: z.string(),
        name: z.string(),
        quantity: z.number().int(),
        unitPriceCents: z.number().int(),
        lineTotalCents: z.number().int(),
      }),
    ),
    payments: z.array(
      z.object({ outTradeNo: z.string(), status: z.string(), amountCents: z.number().int() }),
    ),
    refunds: z.array(refundResource),
  })
  .meta({ id: "OrderDetails" });

export const tokenResource = z.object({ token: z.string() }).meta({ id: "Token" });

export const problemDetails = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string(),
  })
  .meta({ id: "Problem" });
