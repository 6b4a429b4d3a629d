/**
 * The adapter bench's server for ours (npm run bench -- --adapters): the package's adapter for FRAMEWORK
 * (express, fastify or hono), its record in the order's own transaction, with the settings its README gives for
 * load (a replay cache, batched first executions). It places the same order as the floor and the peers
 * (./place-order.ts); ./peer-server.ts is the same route through @node-idempotency in the same framework.
 *
 *   POST /orders  Idempotency-Key: <key>  {"requestId": "…", "items": [{"skuId": "…", "quantity": 1}]}
 *                 → 201 the order, first time and on every replay
 *
 * Started by the bench (./floor.ts) with FRAMEWORK, PORT and DATABASE_URL. ADAPTER_BATCH=<maxSize>x<runners>
 * (or `none`) gives the batch another shape, for experiments: the bench itself never sets it.
 */
import type { Server } from "node:http";
import {
  DEFAULT_IDEMPOTENCY_CONFIG,
  type IdempotencyConfig,
  type IdempotentRoute,
  postgresStore,
  ReplayCache,
  recordSchema,
  requestInvalid,
} from "@exactly-once/idempotency";
import { idempotentExpress } from "@exactly-once/idempotency/express";
import { idempotentFastify } from "@exactly-once/idempotency/fastify";
import { idempotentHono } from "@exactly-once/idempotency/hono";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { type Context, Hono } from "hono";
import type postgres from "postgres";
import { pgClient } from "~/shared/postgres-driver";
import { ADAPTER_USER_ID, FRAMEWORKS, type Framework } from "./floor";
import { type Line, placeOrderIn } from "./place-order";

const { DATABASE_URL, PORT, FRAMEWORK } = process.env;
if (!DATABASE_URL || !FRAMEWORKS.includes(FRAMEWORK as Framework)) {
  throw new Error(`DATABASE_URL and FRAMEWORK (${FRAMEWORKS.join(", ")}) are required`);
}
const sql = pgClient(DATABASE_URL, { max: Number(process.env.DB_POOL_MAX ?? 20), onnotice: () => {} });
const NAMES = { table: "adapter_key", storeOutcome: "adapter_key_store_outcome" };
await sql.unsafe(recordSchema(NAMES));
const store = postgresStore(sql, NAMES);
const config: IdempotencyConfig = {
  ...DEFAULT_IDEMPOTENCY_CONFIG,
  cache: new ReplayCache(),
  batch: { maxSize: 8, runners: 2 },
};
const { ADAPTER_BATCH } = process.env;
if (ADAPTER_BATCH === "none") config.batch = undefined;
else if (ADAPTER_BATCH) {
  const [maxSize, runners] = ADAPTER_BATCH.split("x").map(Number);
  if (!maxSize || !runners) throw new Error(`ADAPTER_BATCH=${ADAPTER_BATCH}: <maxSize>x<runners> or none`);
  config.batch = { maxSize, runners };
}

/** The order under one key: the body checked, then placed in the transaction that records the key. */
function orderOperation(body: unknown) {
  const { requestId, items } = (body ?? {}) as { requestId?: unknown; items?: Line[] };
  if (typeof requestId !== "string" || !Array.isArray(items) || items.length === 0)
    throw requestInvalid("requestId, items");
  return {
    request: { requestId, items },
    batchable: true,
    execute: async (tx: postgres.ReservedSql) => {
      const order = await placeOrderIn(tx, ADAPTER_USER_ID, requestId, items);
      return { result: order, bizId: order.orderId };
    },
  };
}

/** The route in every framework: what it reads of a request differs, the rest is the same. */
const route = <Req>(
  operation: (req: Req) => ReturnType<typeof orderOperation> | Promise<ReturnType<typeof orderOperation>>,
  requestText: (req: Req) => string | Promise<string>,
): IdempotentRoute<unknown, postgres.ReservedSql, Req> => ({
  bizType: "order.create",
  status: 201,
  scope: () => ADAPTER_USER_ID,
  requestText,
  operation,
});

let server: Server;
const port = Number(PORT);
if (FRAMEWORK === "express") {
  const app = express();
  app.post(
    "/orders",
    express.json(),
    idempotentExpress(
      store,
      config,
      route(
        (req: express.Request) => orderOperation(req.body),
        (req) => JSON.stringify(req.body),
      ),
    ),
  );
  server = app.listen(port, "127.0.0.1");
} else if (FRAMEWORK === "fastify") {
  const app = Fastify();
  app.post(
    "/orders",
    idempotentFastify(
      store,
      config,
      route(
        (req: { body: unknown; headers: Record<string, string | string[] | undefined> }) =>
          orderOperation(req.body),
        (req) => JSON.stringify(req.body),
      ),
    ),
  );
  await app.listen({ port, host: "127.0.0.1" });
  server = app.server;
} else {
  const app = new Hono();
  app.post(
    "/orders",
    idempotentHono(
      store,
      config,
      route(
        async (c: Context) => orderOperation(await c.req.json().catch(() => ({}))),
        (c) => c.req.text(),
      ),
    ),
  );
  server = serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }) as Server;
}
server.keepAliveTimeout = 65_000;
process.on("SIGTERM", () => {
  server.close();
  void sql.end({ timeout: 2 }).finally(() => process.exit(0));
});
