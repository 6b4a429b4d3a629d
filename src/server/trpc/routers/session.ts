import { signApiToken } from "~/server/session/session";
import { router, shopperProcedure } from "~/server/trpc/init";

export const sessionRouter = router({
  /** The current guest shopper's bearer token for the REST API. */
  me: shopperProcedure.query(({ ctx }) => ({ apiToken: signApiToken(ctx.userId, ctx.app.sessionSecret) })),
});
