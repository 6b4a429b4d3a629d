// The idempotency core in Express, by its adapter: POST /transfers runs once per Idempotency-Key. From the
// repository: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx examples/express/server.ts
import { postgresStore, recordSchema, requestInvalid } from "@exactly-once/idempotency";
import { idempotentExpress } from "@exactly-once/idempotency/express";
import express from "express";
import postgres from "postgres";

const NAMES = { table: "express_key", storeOutcome: "express_key_store_outcome" };
class OverLimit extends Error {}

export async function createTables(sql: postgres.Sql): Promise<void> {
  await sql.unsafe(recordSchema(NAMES));
  await sql`CREATE TABLE IF NOT EXISTS express_transfer (id serial PRIMARY KEY, account text, recipient text, amount int)`;
}

export function createApp(sql: postgres.Sql): express.Express {
  const app = express();
  app.post(
    "/transfers",
    express.json(),
    idempotentExpress(postgresStore(sql, NAMES), undefined, {
      bizType: "transfer.create",
      status: 201,
      scope: (req: express.Request) => String(req.headers["x-account"] ?? "anonymous"), // in a real app: the caller
      operation: (req) => {
        const { to, amount } = req.body ?? {};
        if (typeof to !== "string" || !Number.isInteger(amount) || amount <= 0)
          throw requestInvalid("to, amount");
        return {
          request: { to, amount },
          execute: async (tx: postgres.ReservedSql) => {
            if (amount > 1000) throw new OverLimit("A transfer is at most 1000.");
            const [row] = await tx`INSERT INTO express_transfer (account, recipient, amount)
                                   VALUES (${String(req.headers["x-account"] ?? "anonymous")}, ${to}, ${amount}) RETURNING id`;
            return { result: { transferId: row?.id, to, amount }, bizId: String(row?.id) };
          },
          refusal: (e) => (e instanceof OverLimit ? { code: "OVER_LIMIT", message: e.message } : undefined),
        };
      },
    }),
  );
  return app;
}

if (process.argv[1]?.endsWith("server.ts")) {
  const sql = postgres(process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
  await createTables(sql);
  createApp(sql).listen(3101, () => console.log("POST http://localhost:3101/transfers"));
}
