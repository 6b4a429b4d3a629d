import type { z } from "zod";
import type { AppContext } from "~/server/app-context";
import { forRequest } from "~/server/observability/request-observer";
import { type AnyOperation, keyOfRawInput, type Operation, runOperation } from "~/server/operations";
import { shopperProcedure } from "./init";

/**
 * Mounts a defined operation as a tRPC mutation: its input schema, the gateway,
 * and the operation run for the calling shopper. A router entry is one line:
 * `create: mutationOf(createRefundOperation)`.
 */
export function mutationOf<S extends z.ZodType, R>(
  op: Operation<S, R, AppContext>,
  options: { deprecatedFor?: string } = {},
) {
  return shopperProcedure
    .meta({
      operation: op as AnyOperation,
      ...options,
      ...(op.gateway !== "off"
        ? { gateway: { keyOf: (input: unknown) => keyOfRawInput(op as AnyOperation, input, "gateway") } }
        : {}),
    })
    .input(op.input)
    .mutation(({ ctx, input }) =>
      // tRPC's inference of a generic schema's output is not z.output<S>; the parser made it exactly that.
      runOperation(
        ctx.app.db,
        op,
        { userId: ctx.userId, input: input as z.output<S>, deps: ctx.app },
        forRequest(ctx.app.idempotency, ctx.requestId),
      ),
    );
}
