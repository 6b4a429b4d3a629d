import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import type postgres from "postgres";
import { createPool, type PoolOptions } from "~/shared/postgres-driver";
import * as schema from "./schema";

/** MockPay's database handle: its own schema and, in the app, its own pool. */
export type MockPayDb = PostgresJsDatabase<typeof schema> & { $client: postgres.Sql };
export type MockPayTx = Parameters<Parameters<MockPayDb["transaction"]>[0]>[0];
export type MockPayExecutor = MockPayDb | MockPayTx;

export function createMockPayDb(url: string, options: PoolOptions = {}): MockPayDb {
  return mockPayDbOver(createPool(url, { applicationName: "mockpay", ...options }));
}

/** MockPay's handle over a pool that already exists (tests share one pool between the two parties). */
export function mockPayDbOver(client: postgres.Sql): MockPayDb {
  return drizzle({ client, schema, casing: "snake_case" });
}
