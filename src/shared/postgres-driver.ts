import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { PgDialect } from "drizzle-orm/pg-core";
import type { PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { PostgresJsSession, PostgresJsTransaction } from "drizzle-orm/postgres-js/session";
import postgres from "postgres";

/**
 * Everything this project assumes about its PostgreSQL driver, postgres.js 3.4.9, in one place:
 * how a connection string is read, why every query is a prepared statement, how a connection is
 * held for a hand-driven transaction, and the patch it cannot run safely without.
 *
 * patches/postgres+3.4.9.patch (applied by patch-package on `npm install`) fixes, upstream:
 * - porsager/postgres#1208: a reserved connection whose backend died throws from a timer (the
 *   process dies) and goes back to the pool as open (fixes proposed in #1168 and #1209);
 * - porsager/postgres#1192: the start-up array-types query of a new connection rejects unhandled;
 * - porsager/postgres#1223: a dead socket's FATAL, its query in flight and its queue are carried to
 *   the reconnected socket, where the next query gets the old error or another statement's rows;
 *   a `reserve()` whose connection died waits forever or leaks its next connection;
 * - a reservation released after its connection closed handed that connection, still reconnecting, to
 *   the next waiting `reserve()`: the waiter's BEGIN was lost with the old socket and its next statement
 *   ran on the new one in autocommit (found by test/connection-drops.test.ts: a one-transaction claim
 *   committed on its own).
 * `npm ci --ignore-scripts` installs the driver unpatched: `assertDriverPatched()` refuses to start then.
 */

/** Text that only the patched files contain, per file of each build (ESM and CommonJS). */
const PATCH_MARKERS: Record<string, string[]> = {
  "connection.js": ["porsager/postgres#1208", "porsager/postgres#1223", "exactly-once-checkout: stray-row"],
  "index.js": ["exactly-once-checkout: released-after-close"],
};

/** The installed postgres.js package folder. */
export function postgresPackageDir(): string {
  const require = createRequire(path.join(process.cwd(), "package.json"));
  // Its exports hide package.json; its CommonJS entry is <package>/cjs/src/index.js.
  return path.resolve(path.dirname(require.resolve("postgres")), "../..");
}

/** Throws, naming the fix, when the installed postgres.js lacks our patch (in its ESM or CommonJS build). */
export function assertDriverPatched(packageDir = postgresPackageDir()): void {
  for (const [name, markers] of Object.entries(PATCH_MARKERS)) {
    for (const file of [`src/${name}`, `cjs/src/${name}`]) {
      // Only the entry points call this; Next must not trace the project for it.
      const text = readFileSync(path.join(/*turbopackIgnore: true*/ packageDir, file), "utf8");
      const missing = markers.filter((marker) => !text.includes(marker));
      if (missing.length > 0) {
        throw new Error(
          `postgres.js at ${packageDir} is not patched (${file} lacks ${missing.join(", ")}): ` +
            "run `npx patch-package` (npm install runs it; --ignore-scripts skips it).",
        );
      }
    }
  }
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
export function preparedByDefault<S extends postgres.Sql>(sql: S): S {
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

export interface PoolOptions {
  max?: number;
  /** Server-side limit per statement; a statement that hits it fails as a transient error. */
  statementTimeoutMs?: number;
  /**
   * The server ends a session left idle inside a transaction this long, releasing its locks. Our
   * transactions never wait on anything outside the database, so only a client that lost track of its
   * connection leaves one open — which the chaos run saw hold a row lock that every later request queued on.
   */
  idleInTransactionTimeoutMs?: number;
  applicationName?: string;
  /** Sees every statement sent, with its parameters (tests: test/shard-lookups.test.ts explains them). */
  debug?: (connection: number, query: string, parameters: unknown[]) => void;
}

/** The longest a closed connection of the pool waits before it connects again, in seconds. */
const MAX_RECONNECT_DELAY_S = 0.5;

/**
 * How long a closed connection waits before connecting again, after `retries` connections of the pool
 * closed on an error since one last connected. postgres.js's default grows as 3^retries / 100 s up to
 * 20 s, and the count is shared by the pool: when PostgreSQL drops every connection at once (a restart,
 * a failover, the chaos run's drop), each close counts, and after six or seven the pool's connections
 * each wait 7 to 20 s, and requests queued behind them stall that long (test/connection-drops.test.ts
 * holds the stall down). Here the wait doubles from 10 ms but never passes half a second, with jitter so reconnects spread.
 */
export function reconnectDelay(retries: number): number {
  return Math.min(0.01 * 2 ** retries, MAX_RECONNECT_DELAY_S) * (0.5 + Math.random() / 2);
}

/** A pool whose every query is a prepared statement, with the server-side limits set per session. */
export function createPool(url: string, options: PoolOptions = {}): postgres.Sql {
  return preparedByDefault(
    pgClient(url, {
      max: options.max ?? 10,
      backoff: reconnectDelay,
      onnotice: () => {},
      ...(options.debug ? { debug: options.debug } : {}),
      connection: {
        application_name: options.applicationName ?? "exactly-once-checkout",
        ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
        ...(options.idleInTransactionTimeoutMs
          ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs }
          : {}),
      },
    }),
  );
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
export interface HeldConnection<Tx> {
  tx: Tx;
  /** Raw statements on the same connection (BEGIN, COMMIT, ROLLBACK). */
  sql: postgres.ReservedSql;
  /**
   * Gives the connection back, never inside a transaction: ROLLBACK first, which
   * is harmless when none is open and fails harmlessly on a connection that is
   * gone (the server ended its transaction; patches/postgres+3.4.9.patch makes
   * postgres.js fail it with CONNECTION_CLOSED rather than throw out of a timer
   * or leave it waiting, and forget the dead socket's queue before reconnecting).
   * `ended`: the caller saw its COMMIT or ROLLBACK succeed, so no transaction is open and the
   * ROLLBACK (a round trip) is skipped.
   */
  close(options?: { ended?: boolean }): Promise<void>;
}

export async function holdConnection<TSchema extends Record<string, unknown>>(
  db: PostgresJsDatabase<TSchema> & { $client: postgres.Sql },
): Promise<HeldConnection<TransactionOf<TSchema>>> {
  const reserved = await db.$client.reserve();
  // The pool's own session carries the dialect (casing) and the parsed schema; reuse them.
  const root = db._.session as unknown as {
    dialect: PgDialect;
    schema: ConstructorParameters<typeof PostgresJsTransaction>[2];
    options: ConstructorParameters<typeof PostgresJsSession>[3];
  };
  const session = new PostgresJsSession(reserved, root.dialect, root.schema, root.options);
  const tx = lazilyRelational(
    new PostgresJsTransaction(root.dialect, session as never, undefined),
    root.dialect,
    session,
    root.schema,
  ) as unknown as TransactionOf<TSchema>;
  return {
    tx,
    sql: reserved,
    close: async ({ ended = false } = {}) => {
      if (ended) {
        reserved.release();
        return;
      }
      // Bounded, as a last resort: a ROLLBACK still queued when the wait ends runs before anything
      // the next holder sends on this connection, so giving it back early is safe.
      const rollback = reserved`ROLLBACK`.catch(() => {});
      await Promise.race([rollback, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      reserved.release();
    },
  };
}

/**
 * A transaction made without its schema, given it afterwards, with its relational queries (`tx.query.…`) made
 * when first asked for: drizzle builds one query builder per table of the schema for every transaction object,
 * about 2 % of a first execution's CPU here, and the hot paths use none of them. The same object otherwise.
 */
function lazilyRelational(
  tx: object,
  dialect: PgDialect,
  session: object,
  schema: ConstructorParameters<typeof PostgresJsTransaction>[2],
) {
  if (!schema) return tx;
  const made = tx as unknown as { schema: unknown; _: Record<string, unknown> };
  made.schema = schema;
  made._ = {
    schema: schema.schema,
    fullSchema: schema.fullSchema,
    tableNamesMap: schema.tableNamesMap,
    session,
  };
  let query: unknown;
  Object.defineProperty(tx, "query", {
    configurable: true,
    enumerable: true,
    get: () => {
      query ??= new PostgresJsTransaction(dialect, session as never, schema).query;
      return query;
    },
  });
  return tx;
}

/** The transaction object `db.transaction()` hands its callback, for a schema. */
export type TransactionOf<TSchema extends Record<string, unknown>> = Parameters<
  Parameters<PostgresJsDatabase<TSchema>["transaction"]>[0]
>[0];

export { isTransientError } from "@exactly-once/idempotency";

/** The constraint a statement violated (drizzle wraps the driver's error in its own: look through causes). */
export function violatedConstraint(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const name = (current as { constraint_name?: unknown }).constraint_name;
    if (typeof name === "string") return name;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
