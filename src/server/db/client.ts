import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import type postgres from "postgres";
import {
  createPool,
  type HeldConnection,
  holdConnection as holdOn,
  type PoolOptions,
} from "~/shared/postgres-driver";
import * as schema from "./schema";

export type Db = PostgresJsDatabase<typeof schema> & { $client: postgres.Sql };
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
/** Anything a query can run on: the pool or an open transaction. */
export type Executor = Db | Tx;
export type CreateDbOptions = PoolOptions;

/** The merchant's database: its schema, snake_case columns, every query prepared (src/shared/postgres-driver.ts). */
export function createDb(url: string, options: CreateDbOptions = {}): Db {
  return drizzle({ client: createPool(url, options), schema, casing: "snake_case" });
}

export async function closeDb(db: Db): Promise<void> {
  await db.$client.end({ timeout: 5 });
}

/** One pooled connection with a drizzle transaction bound to it, for the idempotency core's hand-driven transactions. */
export function holdConnection(db: Db): Promise<HeldConnection<Tx>> {
  return holdOn(db);
}

/**
 * The postgres.js client an executor sends on: the pool's, a held connection's, or a transaction's. For the
 * hot path's few statements, written once as tagged templates (postgres.js keeps each template's text, and
 * every statement is prepared): drizzle's builders rebuild a statement's SQL on every call, which profiling
 * put at about a sixth of an order's CPU.
 */
export function clientOf(executor: Executor): postgres.Sql {
  return (executor as unknown as { _: { session: { client: postgres.Sql } } })._.session.client;
}

export { type HeldConnection, pgClient } from "~/shared/postgres-driver";
