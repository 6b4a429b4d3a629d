/**
 * The bench's peer: the library a Node developer would pick instead of writing an idempotency core,
 * `@node-idempotency/core` with its Redis storage adapter, wired into a small Express server as its README
 * shows (onRequest before the handler, onResponse after it). It places the same order as the floor
 * (./place-order.ts) on a database of its own; its record lives in Redis, outside the business transaction.
 *
 *   POST /orders  Idempotency-Key: <key>  {"requestId": "…", "items": [{"skuId": "…", "quantity": 1}]}
 *                 → 201 the order, first time and on every replay (the stored answer)
 *
 * Started by the bench (./peer.ts) with PORT, DATABASE_URL and REDIS_URL.
 */
import { Idempotency, IdempotencyError, IdempotencyErrorCodes } from "@node-idempotency/core";
import { RedisStorageAdapter } from "@node-idempotency/storage-adapter-redis";
import express from "express";
import { pgClient } from "~/shared/postgres-driver";
import { orderPlacer } from "./place-order";

const { DATABASE_URL, REDIS_URL, PORT } = process.env;
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

const app = express();
app.use(express.json());
app.post("/orders", async (req, res) => {
  const request = { method: req.method, path: req.path, headers: req.headers, body: req.body };
  try {
    const stored = await idempotency.onRequest<unknown, unknown>(request);
    if (stored) {
      res.status(Number(stored.additional?.status ?? 200)).json(stored.body);
      return;
    }
  } catch (error) {
    if (!(error instanceof IdempotencyError)) throw error;
    res.status(STATUS[error.code] ?? 409).json({ code: error.code, message: error.message });
    return;
  }
  try {
    const order = await placeOrder(req.body.requestId, req.body.items);
    await idempotency.onResponse(request, { body: order, additional: { status: 201 } });
    res.status(201).json(order);
  } catch (error) {
    await idempotency.onResponse(request, { error: String(error), additional: { status: 500 } });
    res.status(500).json({ code: "INTERNAL" });
  }
});

const server = app.listen(Number(PORT), "127.0.0.1");
server.keepAliveTimeout = 65_000;
process.on("SIGTERM", () => {
  server.close();
  void Promise.all([sql.end({ timeout: 2 }), storage.disconnect()]).finally(() => process.exit(0));
});
