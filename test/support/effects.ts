import { sql as dsql } from "drizzle-orm";
import type { Tx } from "~/server/db/client";
import type { IdempotentOperation } from "~/server/operations";
import type { TestDatabase } from "./database";

/**
 * The idempotency core tested through a scratch "effect" table: every execution of an operation
 * writes one row, so rows counted afterwards are effects that happened.
 */
export type EffectResult = { effectId: number | undefined; label: string };

export async function createEffectTable(t: TestDatabase) {
  await t.sql`CREATE TABLE effect (id serial PRIMARY KEY, label text NOT NULL)`;
}

export async function writeEffect(tx: Tx, label: string) {
  const [row] = await tx.execute<{ id: number }>(
    dsql`INSERT INTO effect (label) VALUES (${label}) RETURNING id`,
  );
  return { result: { effectId: row?.id, label }, bizId: String(row?.id) };
}

/**
 * An operation that writes one effect labelled with its key. It holds its key with a lease unless a test
 * says `claim: "transaction"`: most tests of the core are about leases, take-overs and fencing.
 */
export function effectOperation(
  bizType: string,
  key: string,
  overrides: Partial<IdempotentOperation<EffectResult>> = {},
): IdempotentOperation<EffectResult> {
  return {
    scope: "shopper-1",
    bizType,
    key,
    request: { label: key },
    storedErrors: ["OUT_OF_STOCK"],
    claim: "lease",
    execute: (tx) => writeEffect(tx, key),
    ...overrides,
  };
}

export async function countEffects(t: TestDatabase, label: string): Promise<number> {
  const [row] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM effect WHERE label = ${label}`;
  return row?.n ?? 0;
}
