/**
 * The bench's peer: the library a Node developer would pick instead of writing an idempotency core,
 * `@node-idempotency/core` with its Redis storage adapter, wired into a small server of FRAMEWORK (express by
 * default, fastify or hono) as its README shows (onRequest before the handler, onResponse after it). It places
 * the same order as the floor (./place-order.ts) on a database of its own; its record lives in Redis, outside
 * the business transaction.
 *
 *   POST /orders  Idempotency-Key: <key>  {"requestId": "…", "items": [{"skuId": "…", "quantity": 1}]}
 *                 → 201 the order, first time and on every replay (the stored answer)
 *
 * Started by the bench (./floor.ts) with PORT, DATABASE_URL, REDIS_URL and FRAMEWORK.
 */
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { Idempotency, IdempotencyError, IdempotencyErrorCodes } from "@node-idempotency/core";
import { RedisStorageAdapter } from "@node-idempotency/storage-adapter-redis";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { pgClient } from "~/shared/postgres-driver";
import { type Line, orderPlacer } from "./place-order";

const { DATABASE_URL, REDIS_URL, PORT, FRAMEWORK = "express" } = process.env;
if (!DATABASE_URL || !REDIS_URL) throw new Error("DATABASE_URL and REDIS_URL are required");
const sql = pgClient(DATABASE_URL, { max: Number(process.env.DB_POOL_MAX ?? 20), onnotice: () => {} });
const placeOrder = orderPlacer(sql, "bench-peer");
const storage = new RedisStorageAdapter({ url: REDIS_URL });
await storage.connect();
// Keys of this run only, and gone soon after it: the machine's Redis is shared.
const idempotency = new Idempotency(storage, {
  cacheKeyPrefix: `bench-peer-${process.pid}-${Date.now()}`,
  cacheTTLMS: 10 * 60 * 1000,
});

const STATUS: Record<IdempotencyErrorCodes, number> = {
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_LEN_EXEEDED]: 400,
  [IdempotencyErrorCodes.IDEMPOTENCY_KEY_MISSING]: 400,
  [IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH]: 422,
  [IdempotencyErrorCodes.REQUEST_IN_PROGRESS]: 409,
};

/** The peer's route as its README wires it: onRequest before the handler, onResponse after it. */
async function answer(request: {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: { requestId: string; items: Line[] };
}): Promise<{ status: number; body: unknown }> {
  try {
    const stored = await idempotency.onRequest<unknown, unknown>(request);
    if (stored) return { status: Number(stored.additional?.status ?? 200), body: stored.body };
  } catch (error) {
    if (!(error instanceof IdempotencyError)) throw error;
    return { status: STATUS[error.code] ?? 409, body: { code: error.code, message: error.message } };
  }
  try {
    const order = await placeOrder(request.body.requestId, request.body.items);
    await idempotency.onResponse(request, { body: order, additional: { status: 201 } });
    return { status: 201, body: order };
  } catch (error) {
    await idempotency.onResponse(request, { error: String(error), additional: { status: 500 } });
    return { status: 500, body: { code: "INTERNAL" } };
  }
}

let server: Server;
const port = Number(PORT);
if (FRAMEWORK === "fastify") {
  const app = Fastify();
  app.post("/orders", async (req, reply) => {
    const { status, body } = await answer({
      method: req.method,
      path: req.url,
      headers: req.headers,
      body: req.body as { requestId: string; items: Line[] },
    });
    return reply.code(status).send(body);
  });
  await app.listen({ port, host: "127.0.0.1" });
  server = app.server;
} else if (FRAMEWORK === "hono") {
  const app = new Hono();
  app.post("/orders", async (c) => {
    const { status, body } = await answer({
      method: c.req.method,
      path: c.req.path,
      headers: c.req.header(),
      body: await c.req.json(),
    });
    return c.json(body, status as 201);
  });
  server = serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }) as Server;
} else {
  const app = express();
  app.use(express.json());
  app.post("/orders", async (req, res) => {
    const { status, body } = await answer({
      method: req.method,
      path: req.path,
      headers: req.headers,
      body: req.body,
    });
    res.status(status).json(body);
  });
  server = app.listen(port, "127.0.0.1");
}
server.keepAliveTimeout = 65_000;
process.on("SIGTERM", () => {
  server.close();
  void Promise.all([sql.end({ timeout: 2 }), storage.disconnect()]).finally(() => process.exit(0));
});
