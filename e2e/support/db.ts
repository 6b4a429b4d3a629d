import type { BrowserContext } from "@playwright/test";
import type postgres from "postgres";
import { pgClient } from "~/server/db/client";
import { e2eDatabaseUrl } from "./config";

let sql: postgres.Sql | undefined;

/** The app's own database, to check what the clicks really did. */
export function database(): postgres.Sql {
  sql ??= pgClient(e2eDatabaseUrl(process.env.DATABASE_URL), { max: 2, onnotice: () => {} });
  return sql;
}

/** The guest id in the browser's signed session cookie. */
export async function shopperId(context: BrowserContext): Promise<string> {
  const cookie = (await context.cookies()).find((c) => c.name === "checkout_session");
  if (!cookie) throw new Error("no session cookie");
  return cookie.value.split(".")[0] ?? "";
}

export async function ordersOf(userId: string) {
  return database()<{ id: string; request_id: string; amount_cents: string; status: string }[]>`
    SELECT id, request_id, amount_cents, status FROM orders WHERE user_id = ${userId} ORDER BY created_at`;
}
