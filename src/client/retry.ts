import { TRPCClientError } from "@trpc/client";

interface ErrorData {
  httpStatus?: number;
  retryable?: boolean;
  retryAfterMs?: number | null;
  domainCode?: string | null;
}

export function errorData(error: unknown): ErrorData | undefined {
  return error instanceof TRPCClientError ? (error.data as ErrorData | undefined) : undefined;
}

/**
 * Worth sending again with the same key: no answer at all (the network dropped
 * it, the server may or may not have committed), a request still in progress,
 * or a server-side failure. Business answers (out of stock, bad input) are not.
 */
export function isRetryable(error: unknown): boolean {
  if (!(error instanceof TRPCClientError)) return false;
  const data = errorData(error);
  if (!data) return true;
  if (data.retryable) return true;
  return (data.httpStatus ?? 0) >= 500;
}

export const MAX_AUTOMATIC_RETRIES = 4;

export function retryDelayMs(attempt: number, error: unknown): number {
  const hinted = errorData(error)?.retryAfterMs;
  const backoff = Math.min(300 * 2 ** attempt, 3_000);
  return Math.max(backoff, Math.min(hinted ?? 0, 5_000));
}

export function errorMessage(error: unknown): string {
  if (!(error instanceof TRPCClientError)) return "Something went wrong.";
  if (!errorData(error)) return "The connection was interrupted.";
  return error.message;
}
