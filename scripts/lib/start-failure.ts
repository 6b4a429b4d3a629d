/**
 * What `npm start` prints when it cannot start: the cause and the fix in a sentence or two, not a stack
 * trace (LOG_LEVEL=debug adds the stack). Every failure a newcomer can meet before the app serves:
 * a setting the environment got wrong, a DATABASE_URL that does not answer or refuses us, and the
 * embedded PostgreSQL (whose own messages, from scripts/lib/embedded-postgres.ts, already say both).
 */
export function explainStartFailure(error: unknown, databaseUrl: string | undefined): string {
  const message = error instanceof Error ? error.message : String(error);
  if (message.startsWith("Invalid environment")) {
    return `${message}\n  Fix or unset the variable named above; every setting is described in docs/configuration.md.`;
  }
  const code = (error as { code?: string }).code;
  const where = databaseUrl ? describeUrl(databaseUrl) : "the database";
  const fromUrl = "\n  Fix DATABASE_URL, or unset it to run on the embedded PostgreSQL (no set-up needed).";
  switch (code) {
    case "ECONNREFUSED":
      return `could not reach the PostgreSQL at ${where}: nothing accepts connections there. Is the server running?${fromUrl}`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `could not reach the PostgreSQL at ${where}: the host name does not resolve.${fromUrl}`;
    case "ETIMEDOUT":
    case "CONNECT_TIMEOUT":
      return `could not reach the PostgreSQL at ${where}: the connection timed out (a firewall, or the wrong host?).${fromUrl}`;
    case "28P01":
    case "28000":
      return `the PostgreSQL at ${where} refused the user or password in DATABASE_URL (${message}).${fromUrl}`;
    case "3D000":
      return `the PostgreSQL at ${where} has no such database (${message}). Create it (createdb), or point DATABASE_URL at one that exists.`;
    case "42501":
      return `the user in DATABASE_URL may not create what the migrations need at ${where} (${message}). Use a user that owns the database.`;
    default:
      return `${message}\n  Run again with LOG_LEVEL=debug for the details.`;
  }
}

/** host:port/database of a connection string, without its password. */
function describeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || 5432}${parsed.pathname}`;
  } catch {
    return "DATABASE_URL (not a valid connection string)";
  }
}
