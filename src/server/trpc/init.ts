import { initTRPC, TRPCError } from "@trpc/server";
import superjson from "superjson";
import { ZodError, z } from "zod";
import { admit } from "~/server/admission/admission";
import { trpcCodeOf } from "~/server/error-codes";
import { DomainError, unavailableIfTransient } from "~/server/errors";
import type { AnyOperation } from "~/server/operations";
import { getLogger } from "~/shared/logger";
import type { TrpcContext } from "./context";

/** Procedure meta: the defined operation a procedure mounts (the plain host runs it; the transport test reads it), and its gateway. */
export interface ProcedureMeta {
  operation?: AnyOperation;
  /** An old name of the procedure, kept for one release: the name to use instead. */
  deprecatedFor?: string;
  /**
   * Admitted per shopper too (and, with `keyOf`, per key: duplicate bursts), not only per client address.
   * `keyOf` reads the raw input: the gateway counts; the idempotency core decides.
   */
  gateway?: { keyOf?: (input: unknown) => string | undefined };
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
      // A body or input tRPC could not read: its parser's own words (a TypeError, a RangeError from deep
      // nesting) say nothing useful to the caller and something about the server.
      const unreadable =
        (error.code === "BAD_REQUEST" || error.code === "PARSE_ERROR") &&
        cause !== undefined &&
        !domain &&
        !(cause instanceof ZodError);
      return {
        ...shape,
        message: internal
          ? "Internal server error"
          : unreadable
            ? 'The request could not be read: send a JSON body (or `input` query parameter) of the form {"json": <input>}.'
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
          ...inputErrors(cause),
        },
      };
    },
  });

/**
 * What was wrong with an input, in the data: by field (`fieldErrors`), and what concerns the input as a whole
 * (`formErrors`: not an object at all, say), so that no refusal says why in its message alone.
 */
function inputErrors(cause: unknown): {
  fieldErrors: Record<string, string[]> | null;
  formErrors: string[] | null;
} {
  if (!(cause instanceof ZodError)) return { fieldErrors: null, formErrors: null };
  const { fieldErrors, formErrors } = z.flattenError(cause);
  return {
    fieldErrors: Object.keys(fieldErrors).length > 0 ? (fieldErrors as Record<string, string[]>) : null,
    formErrors: formErrors.length > 0 ? formErrors : null,
  };
}

/** Errors the procedure middleware already logged (the HTTP handler's onError skips them). */
const logged = new WeakSet<object>();
export const wasLogged = (error: object) => logged.has(error);

/** A domain refusal as tRPC answers it; an unknown error logged once (the HTTP handler's onError skips it). */
export function asTrpcError(
  error: unknown,
  where: { path: string; type: string; ctx: TrpcContext },
): TRPCError {
  // A database that dropped the connection or timed out is a retryable 503, wherever it happened.
  const cause = unavailableIfTransient(error instanceof TRPCError ? error.cause : error);
  if (cause instanceof DomainError) {
    return new TRPCError({ code: trpcCodeOf(cause.code), message: cause.message, cause });
  }
  const internal =
    error instanceof TRPCError ? error : new TRPCError({ code: "INTERNAL_SERVER_ERROR", cause: error });
  if (internal.code === "INTERNAL_SERVER_ERROR") {
    logged.add(internal);
    getLogger().error(
      {
        err: cause ?? internal,
        path: where.path,
        type: where.type,
        requestId: where.ctx.requestId,
        userId: where.ctx.userId,
      },
      "unhandled error in procedure",
    );
  }
  return internal;
}

/**
 * The one middleware of a shopper's procedure (one, not two: each `next()` of tRPC's chain copies the call's
 * options, which profiling put at a tenth of a replay's CPU):
 * - every write goes through admission once (src/server/admission/admission.ts), before anything else runs:
 *   per client address (limits per shopper alone are defeated by asking for a new identity), then per shopper
 *   and key when the procedure's meta says so; each call of a batch counts on its own;
 * - DomainErrors become tRPC codes and unknown errors are logged once. In tRPC v11 `next()` does not throw: it
 *   returns `{ ok: false, error }` with the original error as `error.cause`.
 */
const shopperCall = t.middleware(async ({ next, ctx, path, type, meta, getRawInput }) => {
  if (type === "mutation") await admitMutation(ctx, path, meta, await getRawInput().catch(() => undefined));
  const result = await next();
  if (result.ok) return result;
  const error = asTrpcError(result.error, { path, type, ctx });
  if (error === result.error) return result;
  throw error;
});

/**
 * A mutation's admission (src/server/admission/admission.ts): per client address, then per shopper and key
 * when the procedure's meta says so; a refusal as tRPC answers it. The middleware above calls it, and so
 * does the plain host for a mutation that mounts an operation, which it runs without the procedure
 * (./handler.ts). A middleware added to `shopperProcedure` must be added there too.
 */
export async function admitMutation(
  ctx: TrpcContext,
  path: string,
  meta: ProcedureMeta | undefined,
  rawInput: unknown,
): Promise<void> {
  const keyOf = meta?.gateway?.keyOf;
  const key = keyOf ? keyOf(rawInput) : undefined;
  try {
    await admit(ctx, {
      action: "write",
      route: meta?.operation?.name ?? path,
      userId: ctx.userId,
      perShopper: meta?.gateway !== undefined,
      ...(key !== undefined ? { key } : {}),
    });
  } catch (error) {
    throw asTrpcError(error, { path, type: "mutation", ctx });
  }
}

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;
export const shopperProcedure = t.procedure.use(shopperCall);
