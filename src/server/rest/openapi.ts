import { z } from "zod";
import { createDocument, type ZodOpenApiResponsesObject } from "zod-openapi";
import { KEY_EXPIRES_HEADER, REPLAYED_HEADER } from "./http";
import {
  createOrderBody,
  createRefundBody,
  orderDetails,
  orderResource,
  paymentResource,
  problemDetails,
  refundResource,
  tokenResource,
} from "./schemas";

const idempotencyKeyHeader = z.string().min(8).max(130).meta({
  description:
    'One key per intended operation (a UUID). Retries send the same key. Accepted bare or as a structured-field string ("…").',
  example: "8e03978e-40d5-43e8-bc93-6894a57f9324",
});
const orderIdPath = z.uuid().meta({ description: "The order id (a UUID)" });

const problem = (description: string) => ({
  description,
  content: { "application/problem+json": { schema: problemDetails } },
});

const keyedHeaders = {
  Location: { description: "The order's URL.", schema: { type: "string" as const } },
  [KEY_EXPIRES_HEADER]: {
    description: "When the Idempotency-Key is forgotten (HTTP date); until then a retry replays this answer.",
    schema: { type: "string" as const },
  },
  [REPLAYED_HEADER]: {
    description: "`true` when this answer is the stored answer of an earlier request with the same key.",
    schema: { type: "string" as const },
  },
};

function keyedResponses(schema: z.ZodType, what: string): ZodOpenApiResponsesObject {
  return {
    "201": {
      description: `${what} (or the replay of the first answer)`,
      headers: keyedHeaders,
      content: { "application/json": { schema } },
    },
    "400": problem("Missing or malformed Idempotency-Key, or invalid body"),
    "401": problem("Missing or invalid bearer token"),
    "404": problem("No such order for this shopper"),
    "409": problem(
      "A request with this key is still in progress; retry after Retry-After seconds with the same key",
    ),
    "412": problem(
      "The business said no (out of stock, not payable, refund exceeds payment); replayed for this key",
    ),
    "422": problem("The key was already used with a different request"),
    "503": problem("Temporarily unavailable; retry with the same key"),
  };
}

/** The REST API's OpenAPI 3.1 document, generated from the zod schemas the handlers validate with. */
export function openApiDocument() {
  return createDocument({
    openapi: "3.1.0",
    info: {
      title: "Exactly-once checkout API",
      version: "1.0.0",
      description:
        "Every POST needs an Idempotency-Key header (IETF draft-ietf-httpapi-idempotency-key-header). The same key with the same body replays the first answer (status, body, Location) with `Idempotent-Replayed: true`; with another body it is refused (422); while the first is running, 409 with Retry-After. Keys expire after IDEMPOTENCY_TTL_HOURS (24 h by default).",
    },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
    security: [{ bearer: [] }],
    paths: {
      "/api/v1/tokens": {
        post: {
          summary: "Create a guest shopper and its bearer token",
          security: [],
          responses: {
            "201": { description: "The token", content: { "application/json": { schema: tokenResource } } },
            "403": problem("Token creation is turned off"),
          },
        },
      },
      "/api/v1/orders": {
        post: {
          summary: "Place an order (once per Idempotency-Key)",
          requestParams: { header: z.object({ "idempotency-key": idempotencyKeyHeader }) },
          requestBody: { content: { "application/json": { schema: createOrderBody } } },
          responses: keyedResponses(orderResource, "The order"),
        },
      },
      "/api/v1/orders/{orderId}": {
        get: {
          summary: "An order of this shopper, with its items, payments and refunds",
          requestParams: { path: z.object({ orderId: orderIdPath }) },
          responses: {
            "200": { description: "The order", content: { "application/json": { schema: orderDetails } } },
            "401": problem("Missing or invalid bearer token"),
            "404": problem("No such order for this shopper"),
          },
        },
      },
      "/api/v1/orders/{orderId}/payments": {
        post: {
          summary: "Open the order's payment at MockPay (one open payment per order)",
          requestParams: {
            path: z.object({ orderId: orderIdPath }),
            header: z.object({ "idempotency-key": idempotencyKeyHeader }),
          },
          responses: keyedResponses(paymentResource, "The payment, with the pay page's URL"),
        },
      },
      "/api/v1/orders/{orderId}/refunds": {
        post: {
          summary: "Refund (part of) a paid order; never more than was paid in total",
          requestParams: {
            path: z.object({ orderId: orderIdPath }),
            header: z.object({ "idempotency-key": idempotencyKeyHeader }),
          },
          requestBody: { content: { "application/json": { schema: createRefundBody } } },
          responses: keyedResponses(refundResource, "The refund"),
        },
      },
    },
  });
}
