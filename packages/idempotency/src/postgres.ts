/**
 * What the core needs to know about PostgreSQL and postgres.js beyond sending statements: which failures
 * mean "the database is away, try again", and how to wait for statements sent together.
 */

/** unique_violation: the one-transaction claim found the key taken. */
export const UNIQUE_VIOLATION = "23505";
/** lock_not_available: the holder of the key outlasted the wait. */
export const LOCK_NOT_AVAILABLE = "55P03";

/**
 * Statements issued together on one connection go out in one write; this waits
 * for all of them (so none is still running afterwards) and throws the first failure.
 */
export async function pipelined<R extends unknown[]>(
  statements: {
    [K in keyof R]: PromiseLike<R[K]>;
  },
): Promise<R> {
  const settled = await Promise.allSettled(statements.map((s) => Promise.resolve(s)));
  const failed = settled.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as R;
}

const CONNECTION_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
]);
/** SQLSTATE classes that mean "try again", not "your request is wrong". */
// serialization failure, deadlock, lock not available, statement timeout, admin shutdown, too many connections,
// and a write on a read-only server (25006): a primary demoted by a failover or a switchover, reached before
// the load balancer's health check moved connections to the new primary.
const TRANSIENT_SQLSTATES = new Set([
  "40001",
  "40P01",
  "55P03",
  "57014",
  "57P01",
  "57P02",
  "57P03",
  "53300",
  "25006",
]);

/** Database unreachable, connection lost, serialization failure: worth retrying. */
export function isTransientError(error: unknown): boolean {
  return hasCode(
    error,
    (code) => CONNECTION_ERROR_CODES.has(code) || TRANSIENT_SQLSTATES.has(code) || code.startsWith("08"), // 08: connection exception class
  );
}

/** Whether the error, or one of the errors it was caused by, carries a code that `matches`. */
export function hasCode(error: unknown, matches: (code: string) => boolean): boolean {
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && matches(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
