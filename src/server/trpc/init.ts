import { initTRPC, TRPCError } from "@trpc/server";
import superjson from "superjson";
import { ZodError, z } from "zod";
import { DomainError, type DomainErrorCode, unavailableIfTransient } from "~/server/errors";
import { withRequestContext } from "~/server/observability/request-context";
import { getLogger } from "~/shared/logger";
import type { TrpcContext } from "./context";

type TrpcCode = TRPCError["code"];

/** The one mapping from domain codes to tRPC codes. */
export const TRPC_CODE_BY_DOMAIN_CODE: Record<DomainErrorCode, TrpcCode> = {
  INVALID_INPUT: "BAD_REQUEST",
  UNAUTHORIZED: "UNAUTHORIZED",
  IDEMPOTENCY_KEY_REUSED: "UNPROCESSABLE_CONTENT",
  REQUEST_IN_PROGRESS: "CONFLICT",
  IDEMPOTENCY_LEASE_LOST: "CONFLICT",
  SERVICE_UNAVAILABLE: "SERVICE_UNAVAILABLE",
  SKU_NOT_FOUND: "BAD_REQUEST",
  OUT_OF_STOCK: "PRECONDITION_FAILED",
  ORDER_NOT_FOUND: "NOT_FOUND",
  ORDER_NOT_PAYABLE: "PRECONDITION_FAILED",
  ORDER_NOT_CANCELLABLE: "PRECONDITION_FAILED",
  ORDER_NOT_REFUNDABLE: "PRECONDITION_FAILED",
  REFUND_EXCEEDS_PAID: "PRECONDITION_FAILED",
  RATE_LIMITED: "TOO_MANY_REQUESTS",
};

/** Procedure meta: which defined operation a procedure mounts (the transport test reads it). */
export interface ProcedureMeta {
  operation?: string;
}

const t = initTRPC
  .context<TrpcContext>()
  .meta<ProcedureMeta>()
  .create({
    transformer: superjson,
    // Stack traces stay on the server, in development too.
    isDev: false,
    errorFormatter({ shape, error }) {
      const cause = error.cause;
      const domain = cause instanceof DomainError ? cause : undefined;
      const internal = error.code === "INTERNAL_SERVER_ERROR" && !domain;
      return {
        ...shape,
        message: internal
          ? "Internal server error"
          : cause instanceof ZodError
            ? cause.issues.map((issue) => `${issue.path.join(".") || "input"}: ${issue.message}`).join("; ")
            : shape.message,
        data: {
          code: shape.data.code,
          httpStatus: shape.data.httpStatus,
          path: shape.data.path,
          domainCode: domain?.code ?? null,
          retryable: domain?.retryable ?? false,
          retryAfterMs: domain?.details.retryAfterMs ?? null,
          replayed: domain?.details.replayed ?? false,
          meta: domain?.details.meta ?? null,
          fieldErrors: cause instanceof ZodError ? z.flattenError(cause).fieldErrors : null,
        },
      };
    },
  });

/** Errors the procedure middleware already logged (the HTTP handler's onError skips them). */
const logged = new WeakSet<object>();
export const wasLogged = (error: object) => logged.has(error);

/**
 * Maps DomainErrors to tRPC codes and logs unknown errors once. In tRPC v11
 * `next()` does not throw: it returns `{ ok: false, error }` with the original
 * error as `error.cause`.
 */
const domainErrors = t.middleware(async ({ next, ctx, path, type }) => {
  const result = await withRequestContext({ requestId: ctx.requestId }, () => next());
  if (result.ok) return result;
  // A database that dropped the connection or timed out is a retryable 503, wherever it happened.
  const cause = unavailableIfTransient(result.error.cause);
  if (cause instanceof DomainError) {
    throw new TRPCError({ code: TRPC_CODE_BY_DOMAIN_CODE[cause.code], message: cause.message, cause });
  }
  if (result.error.code === "INTERNAL_SERVER_ERROR") {
    logged.add(result.error);
    getLogger().error(
      { err: cause ?? result.error, path, type, requestId: ctx.requestId, userId: ctx.userId },
      "unhandled error in procedure",
    );
  }
  return result;
});

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;
export const shopperProcedure = t.procedure.use(domainErrors);
