import type { z } from "zod";
import type { AppContext } from "~/server/app-context";
import { gatewayKeyOf, type Operation, runOperation } from "~/server/idempotency";
import { shopperProcedure } from "./init";

/**
 * Mounts a defined operation as a tRPC mutation: its input schema, the gateway,
 * and the operation run for the calling shopper. A router entry is one line:
 * `create: mutationOf(createRefundOperation)`.
 */
export function mutationOf<S extends z.ZodType, R>(op: Operation<S, R, AppContext>) {
  return shopperProcedure
    .meta({ operation: op.name })
    .input(op.input)
    .use(async ({ ctx, input, next }) => {
      if (op.gateway !== "off") {
        const key = gatewayKeyOf(op as never, { input });
        await ctx.app.gateway.admit({ userId: ctx.userId, route: op.name, key });
      }
      return next();
    })
    .mutation(({ ctx, input }) =>
      // tRPC's inference of a generic schema's output is not z.output<S>; the parser made it exactly that.
      runOperation(
        ctx.app.db,
        op,
        { userId: ctx.userId, input: input as z.output<S>, deps: ctx.app },
        ctx.app.idempotency,
      ),
    );
}
