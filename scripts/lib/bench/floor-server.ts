/**
 * The bench's floor: a bare `node:http` server that places the same order as
 * `orders.create` (price the lines from `sku`, insert the order and its
 * lines in one transaction through postgres.js) with nothing else: no session,
 * no validation, no idempotency, no framework. It is what a developer would
 * write first, and every other figure of the bench is divided by it.
 *
 *   POST /orders  {"requestId": "…", "items": [{"skuId": "…", "quantity": 1}]}  → 201 the order
 *   POST /answer  the same body → 201 an answer of the same shape, from memory (no database): the least
 *                 any node:http server does for a request, so no replay can beat it
 *
 * Started by the bench (scripts/lib/bench/scenarios/floor.ts) with PORT and DATABASE_URL.
 */
import { createServer } from "node:http";
import { pgClient } from "~/shared/postgres-driver";
import { type Line, orderPlacer } from "./place-order";

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) throw new Error("DATABASE_URL is required");
// pgClient only reads a Unix-socket `?host=` (the embedded server); the client is postgres.js as is.
const sql = pgClient(databaseUrl, { max: Number(process.env.DB_POOL_MAX ?? 20), onnotice: () => {} });
const placeOrder = orderPlacer(sql, process.env.FLOOR_USER_ID ?? "bench-floor");

/** What /answer sends: an order's answer, made once. */
const STORED_ANSWER = JSON.stringify({
  orderId: "00000000-0000-4000-8000-000000000000",
  status: "PENDING_PAYMENT",
  amountCents: 1200,
  currency: "USD",
});

const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (chunk: string) => (body += chunk));
  req.on("end", () => {
    let parsed: { requestId: string; items: Line[] };
    try {
      parsed = JSON.parse(body);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (req.url === "/answer") {
      res.writeHead(201, { "content-type": "application/json" }).end(STORED_ANSWER);
      return;
    }
    placeOrder(parsed.requestId, parsed.items).then(
      (order) => {
        const json = JSON.stringify(order);
        res.writeHead(201, { "content-type": "application/json" }).end(json);
      },
      (error: unknown) => {
        res.writeHead(500, { "content-type": "text/plain" }).end(String(error));
      },
    );
  });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), "127.0.0.1");
process.on("SIGTERM", () => {
  server.close();
  void sql.end({ timeout: 2 }).then(() => process.exit(0));
});
