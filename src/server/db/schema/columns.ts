import { sql } from "drizzle-orm";
import { bigint, check, timestamp } from "drizzle-orm/pg-core";

export const createdAt = () => timestamp({ withTimezone: true }).notNull().defaultNow();
export const identity = () => bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity();
/** An identity column that is part of a composite primary key ((user_id, id), see merchant.ts). */
export const identityPart = () => bigint({ mode: "number" }).notNull().generatedAlwaysAsIdentity();

/** Every status (and other closed set) is a CHECK constraint. */
export function inList(name: string, column: string, values: readonly string[]) {
  return check(name, sql.raw(`${column} IN (${values.map((v) => `'${v}'`).join(", ")})`));
}
