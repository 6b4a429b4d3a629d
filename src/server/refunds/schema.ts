import { z } from "zod";
import { requestIdSchema } from "~/server/orders/schema";

export const createRefundInput = z.object({
  orderId: z.uuid("orderId must be a UUID"),
  /** The refund's business key, made by the client once per refund intent. */
  refundNo: requestIdSchema,
  amountCents: z
    .number()
    .int("amountCents must be a whole number of cents")
    .positive("amountCents must be positive")
    .max(100_000_000, "amountCents is too large"),
});
export type CreateRefundInput = z.infer<typeof createRefundInput>;
