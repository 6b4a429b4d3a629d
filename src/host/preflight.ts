import { existsSync } from "node:fs";
import { getEnv } from "~/env";
import { pgClient } from "~/server/db/client";
import { schemaBehind } from "~/server/db/schema-version";

/**
 * Why the production server must not start, each problem named with what to do about it; empty: it may. It
 * does not build, migrate or seed (those are release steps: docs/deploy.md), so it refuses to run without
 * their results: a build, a database of its own (DATABASE_URL), and that database's schema at this code's
 * head. The secrets come first (getEnv refuses short or missing ones in production).
 */
export async function startProblems(environment: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const problems: string[] = [];
  let databaseUrl: string | undefined;
  try {
    databaseUrl = getEnv().databaseUrl;
  } catch (error) {
    problems.push(
      ...String((error as Error).message)
        .split("\n")
        .map((line) => line.replace(/^- /, ""))
        .filter(Boolean),
    );
  }
  if (environment.NODE_ENV === "production" && !environment.DATABASE_URL) {
    problems.push(
      "DATABASE_URL is not set: the production server does not start a database of its own (npm start does); set it to your PostgreSQL",
    );
    databaseUrl = undefined;
  }
  if (!existsSync(".next/BUILD_ID"))
    problems.push("there is no build of the app in .next: run npm run build first");
  if (databaseUrl) {
    const sql = pgClient(databaseUrl, { max: 1, connect_timeout: 5, onnotice: () => {} });
    try {
      const behind = await schemaBehind(sql);
      if (behind) problems.push(behind);
    } catch (error) {
      problems.push(
        `the database does not answer (${new URL(databaseUrl).host}): ${(error as Error).message}`,
      );
    } finally {
      await sql.end({ timeout: 1 }).catch(() => {});
    }
  }
  return problems;
}
