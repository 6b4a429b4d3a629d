import { z } from "zod";
import { orderResource } from "~/server/orders/schema";
import { refundResource } from "~/server/refunds/schema";

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
