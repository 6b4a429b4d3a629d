// The idempotency core in Hono, by its adapter: POST /transfers runs once per Idempotency-Key. From the
// repository: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx examples/hono/server.ts

import { postgresStore, recordSchema, requestInvalid } from "@exactly-once/idempotency";
import { idempotentHono } from "@exactly-once/idempotency/hono";
import { serve } from "@hono/node-server";
import { type Context, Hono } from "hono";
import postgres from "postgres";

const NAMES = { table: "hono_key", storeOutcome: "hono_key_store_outcome" };
class OverLimit extends Error {}

export async function createTables(sql: postgres.Sql): Promise<void> {
  await sql.unsafe(recordSchema(NAMES));
  await sql`CREATE TABLE IF NOT EXISTS hono_transfer (id serial PRIMARY KEY, account text, recipient text, amount int)`;
}

export function createApp(sql: postgres.Sql): Hono {
  const app = new Hono();
  const account = (c: Context) => c.req.header("x-account") ?? "anonymous"; // in a real app: the caller
  app.post(
    "/transfers",
    idempotentHono(postgresStore(sql, NAMES), undefined, {
      bizType: "transfer.create",
      status: 201,
      scope: account,
      operation: async (c: Context) => {
        const { to, amount } = await c.req.json().catch(() => ({}));
        if (typeof to !== "string" || !Number.isInteger(amount) || amount <= 0)
          throw requestInvalid("to, amount");
        return {
          request: { to, amount },
          execute: async (tx: postgres.ReservedSql) => {
            if (amount > 1000) throw new OverLimit("A transfer is at most 1000.");
            const [row] = await tx`INSERT INTO hono_transfer (account, recipient, amount)
                                   VALUES (${account(c)}, ${to}, ${amount}) RETURNING id`;
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
  serve({ fetch: createApp(sql).fetch, port: 3103 }, () =>
    console.log("POST http://localhost:3103/transfers"),
  );
}
