import type { PgDialect } from "drizzle-orm/pg-core";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { PostgresJsSession, PostgresJsTransaction } from "drizzle-orm/postgres-js/session";
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
  /**
   * The server ends a session left idle inside a transaction this long, releasing its locks. Our
   * transactions never wait on anything outside the database, so only a client that lost track of its
   * connection leaves one open — which the chaos run saw hold a row lock that every later request queued on.
   */
  idleInTransactionTimeoutMs?: number;
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

/**
 * drizzle's postgres.js driver sends every ordinary query unprepared
 * (`unsafe(query, params, { prepare: false })`, drizzle-orm#6096), and postgres.js
 * then describes each parameterised statement before binding it: two round trips
 * per query, and nothing else can be pipelined behind it. This hands drizzle a
 * client whose queries — in transactions and on held connections too — are named
 * prepared statements, cached per connection: one round trip each after the first.
 * Our statements are a bounded set of shapes, so the per-connection cache stays small.
 */
function preparedByDefault<S extends postgres.Sql>(sql: S): S {
  return new Proxy(sql, {
    get(target, property, receiver) {
      switch (property) {
        case "unsafe":
          return (query: string, params?: never[], options?: postgres.UnsafeQueryOptions) =>
            target.unsafe(query, params, { ...options, prepare: true });
        case "begin":
        case "savepoint":
          return (...args: unknown[]) => {
            const callback = args.pop() as (scoped: postgres.Sql) => unknown;
            const method = Reflect.get(target, property) as (...a: unknown[]) => unknown;
            return method.apply(target, [
              ...args,
              (scoped: postgres.Sql) => callback(preparedByDefault(scoped)),
            ]);
          };
        case "reserve":
          return async () => preparedByDefault(await target.reserve());
        default:
          return Reflect.get(target, property, receiver);
      }
    },
  });
}

export function createDb(url: string, options: CreateDbOptions = {}): Db {
  const client = pgClient(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connection: {
      application_name: "exactly-once-checkout",
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
      ...(options.idleInTransactionTimeoutMs
        ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs }
        : {}),
    },
  });
  return drizzle({ client: preparedByDefault(client), schema, casing: "snake_case" });
}

export async function closeDb(db: Db): Promise<void> {
  await db.$client.end({ timeout: 5 });
}

/**
 * One pooled connection, held until `release()`, on which the caller sends BEGIN,
 * COMMIT and ROLLBACK itself. `tx` is the same drizzle transaction object that
 * `db.transaction()` hands its callback, bound to this connection, so business
 * code cannot tell the difference (nested transactions are not supported).
 *
 * Why not `db.transaction()`: it waits for BEGIN before the first statement and
 * sends COMMIT only after the last one has answered. Statements issued together
 * on one connection travel in one write, and on this machine each round trip to
 * PostgreSQL costs more CPU than building and running the statement; the
 * idempotency core sends its own statements alongside BEGIN, the business
 * transaction's first read and COMMIT.
 */
export interface HeldConnection {
  tx: Tx;
  /** Raw statements on the same connection (BEGIN, COMMIT, ROLLBACK). */
  sql: postgres.ReservedSql;
  /**
   * Gives the connection back, never inside a transaction: ROLLBACK first, which
   * is harmless when none is open and fails harmlessly on a connection that is
   * gone (the server ended its transaction; patches/postgres+3.4.9.patch makes
   * postgres.js fail it with CONNECTION_CLOSED rather than throw out of a timer
   * or leave it waiting, and forget the dead socket's queue before reconnecting).
   */
  close(): Promise<void>;
}

export async function holdConnection(db: Db): Promise<HeldConnection> {
  const reserved = await db.$client.reserve();
  // The pool's own session carries the dialect (casing) and the parsed schema; reuse them.
  const root = db._.session as unknown as {
    dialect: PgDialect;
    schema: ConstructorParameters<typeof PostgresJsTransaction>[2];
    options: ConstructorParameters<typeof PostgresJsSession>[3];
  };
  const session = new PostgresJsSession(reserved, root.dialect, root.schema, root.options);
  const tx = new PostgresJsTransaction(root.dialect, session as never, root.schema) as unknown as Tx;
  return {
    tx,
    sql: reserved,
    close: async () => {
      // Bounded, as a last resort: a ROLLBACK still queued when the wait ends runs before anything
      // the next holder sends on this connection, so giving it back early is safe.
      const rollback = reserved`ROLLBACK`.catch(() => {});
      await Promise.race([rollback, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      reserved.release();
    },
  };
}
