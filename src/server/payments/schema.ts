import { z } from "zod";

/** A payment as the API answers it: where to pay, and how much. */
export const paymentResource = z
  .object({
    outTradeNo: z.string(),
    payUrl: z.string(),
    amountCents: z.number().int(),
    currency: z.string(),
  })
  .meta({ id: "Payment" });
