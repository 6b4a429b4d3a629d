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

/** The REST body of a refund (the refund's key travels in the Idempotency-Key header). */
export const createRefundBody = z
  .object({ amountCents: createRefundInput.shape.amountCents })
  .meta({ id: "CreateRefundRequest" });

/** A refund as the API answers it. */
export const refundResource = z
  .object({
    refundNo: z.string(),
    status: z.string(),
    amountCents: z.number().int(),
    currency: z.string(),
  })
  .meta({ id: "Refund" });
