import { z } from "zod";

export const MAX_QUANTITY_PER_LINE = 99;
export const MAX_LINES = 20;

/** A client-made key: a UUID in practice; any 8-128 URL-safe characters are accepted. */
/** A client's key (a request id, an Idempotency-Key): 8-128 URL-safe characters, starting with a letter or digit. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$/;

export const requestIdSchema = z
  .string()
  .regex(REQUEST_ID_PATTERN, "requestId must be 8-128 characters of letters, digits, '.', '_', ':' or '-'");

export const skuIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, "skuId must be 1-64 letters, digits, '_' or '-'");

export const orderLineSchema = z.object({
  skuId: skuIdSchema,
  quantity: z
    .number()
    .int("quantity must be a whole number")
    .min(1, "quantity must be at least 1")
    .max(MAX_QUANTITY_PER_LINE, `quantity must be at most ${MAX_QUANTITY_PER_LINE}`),
});

/** A coupon's code, as the benefits consumer makes it (`THANKS-1A2B3C4D`). */
export const couponCodeSchema = z
  .string()
  .regex(/^[A-Z0-9][A-Z0-9-]{3,31}$/, "couponCode must be 4-32 capital letters, digits or '-'");

export const createOrderInput = z.object({
  requestId: requestIdSchema,
  items: z
    .array(orderLineSchema)
    .min(1, "an order needs at least one item")
    .max(MAX_LINES, `an order has at most ${MAX_LINES} lines`),
  /** A coupon of the shopper's to spend on this order (once: a second order with it gets COUPON_ALREADY_USED). */
  couponCode: couponCodeSchema.optional(),
});
export type CreateOrderInput = z.infer<typeof createOrderInput>;
export type OrderLine = z.infer<typeof orderLineSchema>;

/** The REST body of an order: the items (the key travels in the Idempotency-Key header). */
export const createOrderBody = z
  .object({ items: createOrderInput.shape.items, couponCode: createOrderInput.shape.couponCode })
  .meta({ id: "CreateOrderRequest" });

/** An order as the API answers it. */
export const orderResource = z
  .object({
    orderId: z.uuid(),
    status: z.string(),
    amountCents: z.number().int(),
    /** Taken off by a coupon (absent: none). */
    discountCents: z.number().int().optional(),
    currency: z.string(),
  })
  .meta({ id: "Order" });
