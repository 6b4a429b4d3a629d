import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema";

export type Db = PostgresJsDatabase<typeof schema> & { $client: postgres.Sql };
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
/** Anything a query can run on: the pool or an open transaction. */
export type Executor = Db | Tx;

export interface CreateDbOptions {
  max?: number;
  /** Server-side limit per statement; a statement that hits it fails as a transient error. */
  statementTimeoutMs?: number;
}

export function createDb(url: string, options: CreateDbOptions = {}): Db {
  const client = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connection: {
      application_name: "exactly-once-checkout",
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
    },
  });
  return drizzle({ client, schema, casing: "snake_case" });
}

export async function closeDb(db: Db): Promise<void> {
  await db.$client.end({ timeout: 5 });
}
