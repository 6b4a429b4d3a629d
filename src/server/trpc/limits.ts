/**
 * Procedure calls one tRPC HTTP request may carry. The server refuses a longer batch whole
 * (400); the browser's batch link splits at the same size. Each call in a batch is still
 * admitted by the gateway on its own.
 */
export const TRPC_MAX_BATCH_SIZE = 10;
