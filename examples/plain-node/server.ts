// The idempotency core in a bare node:http server: its own table, one operation, no framework. From the
// repository: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx examples/plain-node/server.ts
import http from "node:http";
import * as core from "@exactly-once/idempotency";
import postgres from "postgres";

const NAMES = { table: "example_key", storeOutcome: "example_key_store_outcome" };
const STATUS: Record<string, number> = {
  IDEMPOTENCY_KEY_REUSED: 422,
  SERVICE_UNAVAILABLE: 503,
  OVER_LIMIT: 422,
};
class OverLimit extends Error {}

export async function createTables(sql: postgres.Sql): Promise<void> {
  await sql.unsafe(core.recordSchema(NAMES));
  await sql`CREATE TABLE IF NOT EXISTS transfer (id serial PRIMARY KEY, account text, recipient text, amount int)`;
}

export function createApp(sql: postgres.Sql): http.Server {
  const store = core.postgresStore(sql, NAMES);
  return http.createServer(async (req, res) => {
    const send = (status: number, body: unknown, headers = {}) =>
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
    const key = req.headers["idempotency-key"];
    if (req.method !== "POST" || req.url !== "/transfers") return send(404, { code: "NOT_FOUND" });
    if (typeof key !== "string" || !/^[\x21-\x7e]{1,255}$/.test(key))
      return send(400, { code: "KEY_REQUIRED" });
    // A body that is not JSON is {}: refused below like any other invalid transfer.
    const { to, amount } = await new Response(req as unknown as ReadableStream).json().catch(() => ({}));
    if (typeof to !== "string" || !Number.isInteger(amount) || amount <= 0)
      return send(400, { code: "INVALID" });
    try {
      const account = String(req.headers["x-account"] ?? "anonymous"); // in a real app: the authenticated caller
      const answer = await core.runIdempotent(store, {
        scope: account,
        bizType: "transfer.create",
        key,
        request: { to, amount },
        execute: async (tx) => {
          if (amount > 1000) throw new OverLimit("A transfer is at most 1000.");
          const [row] = await tx`INSERT INTO transfer (account, recipient, amount)
                                 VALUES (${account}, ${to}, ${amount}) RETURNING id`;
          return { result: { transferId: row?.id, to, amount }, bizId: String(row?.id) };
        },
        // A business refusal that is final: stored under the key and answered again, like a success.
        refusal: (e) => (e instanceof OverLimit ? { code: "OVER_LIMIT", message: e.message } : undefined),
      });
      send(201, answer.result, { "idempotent-replayed": String(answer.replayed) });
    } catch (error) {
      if (!(error instanceof core.IdempotencyError)) return send(500, { code: "INTERNAL" });
      send(STATUS[error.code] ?? 409, { code: error.code, message: error.message });
    }
  });
}

export const forgetExpired = (sql: postgres.Sql) => core.deleteExpired({ sql, table: NAMES.table }); // every minute

if (process.argv[1]?.endsWith("server.ts")) {
  const sql = postgres(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
  await createTables(sql);
  setInterval(() => forgetExpired(sql).catch(console.error), 60_000);
  createApp(sql).listen(3100, () => console.log("POST http://localhost:3100/transfers"));
}
