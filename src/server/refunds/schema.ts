import { z } from "zod";
import { MAX_LINES, orderLineSchema, requestIdSchema } from "~/server/orders/schema";

const amountCents = z
  .number()
  .int("amountCents must be a whole number of cents")
  .positive("amountCents must be positive")
  .max(100_000_000, "amountCents is too large");

/** Lines given back: their stock returns when the refund succeeds. */
const refundLines = z
  .array(orderLineSchema)
  .min(1, "lines, when given, name at least one line")
  .max(MAX_LINES, `a refund names at most ${MAX_LINES} lines`);

const needsAmountOrLines = (input: { amountCents?: number; lines?: unknown[] }) =>
  input.amountCents !== undefined || input.lines !== undefined;
const needsAmountOrLinesMessage = { message: "give amountCents, lines, or both" };

export const createRefundInput = z
  .object({
    orderId: z.uuid("orderId must be a UUID"),
    /** The refund's business key, made by the client once per refund intent; each shopper's own. */
    refundNo: requestIdSchema,
    /** What goes back; absent: what the lines were paid (their share of any coupon taken off). */
    amountCents: amountCents.optional(),
    lines: refundLines.optional(),
  })
  .refine(needsAmountOrLines, needsAmountOrLinesMessage);
export type CreateRefundInput = z.infer<typeof createRefundInput>;

/** The REST body of a refund (the refund's key travels in the Idempotency-Key header). */
export const createRefundBody = z
  .object({ amountCents: amountCents.optional(), lines: refundLines.optional() })
  .refine(needsAmountOrLines, needsAmountOrLinesMessage)
  .meta({ id: "CreateRefundRequest" });

/** A refund as the API answers it. */
export const refundResource = z
  .object({
    refundNo: z.string(),
    status: z.string(),
    amountCents: z.number().int(),
    currency: z.string(),
    /** The lines it gives back (absent: none named). */
    lines: z.array(z.object({ skuId: z.string(), quantity: z.number().int() })).optional(),
  })
  .meta({ id: "Refund" });
