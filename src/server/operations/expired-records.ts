import * as core from "@exactly-once/idempotency";
import type { Db } from "~/server/db/client";
import { recordStore } from "./record-store";

export type CleanupOptions = core.DeleteExpiredOptions;

/** The app's expired keys forgotten: the core's `deleteExpired` on its record table (packages/idempotency/src/expire.ts). */
export function deleteExpiredRecords(db: Db, options: CleanupOptions = {}): Promise<number> {
  return core.deleteExpired(recordStore(db), options);
}
