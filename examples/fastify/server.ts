// The idempotency core in Fastify, by its adapter: POST /transfers runs once per Idempotency-Key. From the
// repository: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx examples/fastify/server.ts
import { postgresStore, recordSchema, requestInvalid } from "@exactly-once/idempotency";
import { idempotentFastify } from "@exactly-once/idempotency/fastify";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import postgres from "postgres";

const NAMES = { table: "fastify_key", storeOutcome: "fastify_key_store_outcome" };
class OverLimit extends Error {}

export async function createTables(sql: postgres.Sql): Promise<void> {
  await sql.unsafe(recordSchema(NAMES));
  await sql`CREATE TABLE IF NOT EXISTS fastify_transfer (id serial PRIMARY KEY, account text, recipient text, amount int)`;
}

export function createApp(sql: postgres.Sql): FastifyInstance {
  const app = Fastify();
  const account = (req: FastifyRequest) => String(req.headers["x-account"] ?? "anonymous"); // a real app: the caller
  app.post(
    "/transfers",
    idempotentFastify(postgresStore(sql, NAMES), undefined, {
      bizType: "transfer.create",
      status: 201,
      scope: account,
      operation: (req: FastifyRequest) => {
        const { to, amount } = (req.body ?? {}) as { to?: unknown; amount?: unknown };
        if (typeof to !== "string" || !Number.isInteger(amount) || (amount as number) <= 0)
          throw requestInvalid("to, amount");
        return {
          request: { to, amount },
          execute: async (tx: postgres.ReservedSql) => {
            if ((amount as number) > 1000) throw new OverLimit("A transfer is at most 1000.");
            const [row] = await tx`INSERT INTO fastify_transfer (account, recipient, amount)
                                   VALUES (${account(req)}, ${to}, ${amount as number}) RETURNING id`;
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
  await createApp(sql).listen({ port: 3102 });
  console.log("POST http://localhost:3102/transfers");
}
