import type postgres from "postgres";
import type { RecordStore } from "./types";

/**
 * A record store over a plain postgres.js pool, with the names `recordSchema` made: each call holds a reserved
 * connection of its own, and `execute` writes with that connection (`tx`). A connection given back while a
 * transaction may still be open on it is rolled back first. An app whose business writes use another handle
 * (drizzle, say) binds it to the held connection in a `hold` of its own.
 */
export function postgresStore(
  sql: postgres.Sql,
  names: { table: string; storeOutcome: string },
): RecordStore<postgres.ReservedSql> {
  return {
    ...names,
    sql,
    hold: async () => {
      const conn = await sql.reserve();
      return {
        tx: conn,
        sql: conn,
        close: async ({ ended = false } = {}) => {
          if (!ended) await conn`ROLLBACK`.catch(() => {});
          conn.release();
        },
      };
    },
  };
}
