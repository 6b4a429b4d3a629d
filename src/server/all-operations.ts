import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { createOrderOperation } from "~/server/orders/create-order";
import { createPaymentOperation } from "~/server/payments/create-payment";
import { createRefundOperation } from "~/server/refunds/create-refund";

/**
 * Every idempotent operation of the app, each defined once in its capability folder.
 * The OpenAPI document is made from this list, and test/operations.test.ts proves each
 * is mounted over tRPC and REST and has a concurrency test.
 */
export const OPERATIONS = [
  createOrderOperation,
  cancelOrderOperation,
  createPaymentOperation,
  createRefundOperation,
] as const;
