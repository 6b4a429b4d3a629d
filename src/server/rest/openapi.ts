import { z } from "zod";
import {
  createDocument,
  type ZodOpenApiOperationObject,
  type ZodOpenApiPathsObject,
  type ZodOpenApiResponsesObject,
} from "zod-openapi";
import { OPERATIONS } from "~/server/all-operations";
import { httpStatusOf } from "~/server/error-codes";
import type { AnyOperation } from "~/server/operations";
import { POLICY_PATH } from "./policy";
import { KEY_EXPIRES_HEADER, REPLAYED_HEADER } from "./protocol";
import { orderDetails, problemDetails, tokenResource } from "./schemas";

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
  Location: { description: "The order's URL (on a create).", schema: { type: "string" as const } },
  [KEY_EXPIRES_HEADER]: {
    description: "When the Idempotency-Key is forgotten (HTTP date); until then a retry replays this answer.",
    schema: { type: "string" as const },
  },
  [REPLAYED_HEADER]: {
    description: "`true` when this answer is the stored answer of an earlier request with the same key.",
    schema: { type: "string" as const },
  },
};

/** The answers of a mounted operation: its resource, the key's rules, and every stored refusal by its status. */
function keyedResponses(op: AnyOperation, schema: z.ZodType, status: number): ZodOpenApiResponsesObject {
  const refusals = new Map<number, string[]>();
  for (const code of op.storedErrors) {
    const httpStatus = httpStatusOf(code);
    refusals.set(httpStatus, [...(refusals.get(httpStatus) ?? []), code]);
  }
  const responses: Record<string, unknown> = {
    [String(status)]: {
      description: "The answer (or the replay of the first answer for this key)",
      headers: keyedHeaders,
      content: { "application/json": { schema } },
    },
    "400": problem("Missing or malformed Idempotency-Key, or invalid body"),
    "401": problem("Missing or invalid bearer token"),
    "409": problem(
      "A request with this key is still in progress; retry after Retry-After seconds with the same key",
    ),
    "422": problem("The key was already used with a different request"),
    "429": problem("Too many requests (the gateway); retry after Retry-After seconds with the same key"),
    "503": problem("Temporarily unavailable; retry with the same key"),
  };
  for (const [httpStatus, codes] of refusals) {
    if (httpStatus === 400) continue;
    responses[String(httpStatus)] = problem(`${codes.join(", ")}: stored and replayed for this key`);
  }
  return responses as ZodOpenApiResponsesObject;
}

function operationPath(op: AnyOperation): ZodOpenApiOperationObject {
  const rest = op.rest;
  if (!rest) throw new Error(`${op.name} has no REST binding`);
  return {
    operationId: op.name,
    summary: rest.summary,
    requestParams: {
      ...(rest.params ? { path: rest.params } : {}),
      header: z.object({ "idempotency-key": idempotencyKeyHeader }),
    },
    ...(rest.body ? { requestBody: { content: { "application/json": { schema: rest.body } } } } : {}),
    responses: keyedResponses(op, rest.resource, rest.status),
  };
}

/** The defined operations' REST routes, by path. */
function operationPaths(): ZodOpenApiPathsObject {
  const paths: ZodOpenApiPathsObject = {};
  for (const op of OPERATIONS as readonly AnyOperation[]) {
    if (op.rest) paths[op.rest.path] = { ...paths[op.rest.path], post: operationPath(op) };
  }
  return paths;
}

/** The REST API's OpenAPI 3.1 document, generated from the zod schemas the handlers validate with. */
export function openApiDocument() {
  return createDocument({
    openapi: "3.1.0",
    info: {
      title: "Exactly-once checkout API",
      version: "1.0.0",
      description:
        "Every POST needs an Idempotency-Key header (IETF draft-ietf-httpapi-idempotency-key-header). The same key with the same body replays the first answer (status, body, Location) with `Idempotent-Replayed: true`; with another body it is refused (422); while the first is running, 409 with Retry-After. Keys expire after IDEMPOTENCY_TTL_HOURS (24 h by default). The policy (which operations, key syntax, expiry, what is fingerprinted, what is replayed) is published at GET /api/v1/idempotency-policy.",
    },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
    security: [{ bearer: [] }],
    paths: {
      ...operationPaths(),
      [POLICY_PATH]: {
        get: {
          summary:
            "The idempotency policy: which operations need a key, its syntax and expiry, what is fingerprinted and replayed",
          security: [],
          responses: { "200": { description: "The policy (application/json)" } },
        },
      },
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
    },
  });
}
