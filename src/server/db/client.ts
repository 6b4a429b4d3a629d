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

/**
 * A postgres.js client for a connection string. Understands libpq's Unix-socket
 * form, `postgres://user@localhost:5432/db?host=/run/postgresql` (the socket
 * folder in `host`), which postgres.js would otherwise send to the server as a
 * setting; the embedded server is reached that way (see scripts/lib/embedded-postgres.ts).
 */
export function pgClient(url: string, options: postgres.Options<Record<string, postgres.PostgresType>> = {}) {
  const parsed = new URL(url);
  const socketDir = parsed.searchParams.get("host");
  if (!socketDir?.startsWith("/")) return postgres(url, options);
  parsed.searchParams.delete("host");
  return postgres(parsed.toString(), { ...options, host: socketDir });
}

export function createDb(url: string, options: CreateDbOptions = {}): Db {
  const client = pgClient(url, {
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
