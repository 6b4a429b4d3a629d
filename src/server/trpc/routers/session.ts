import { signApiToken } from "../../session/session";
import { router, shopperProcedure } from "../init";

export const sessionRouter = router({
  /** The current guest shopper's bearer token for the REST API. */
  me: shopperProcedure.query(({ ctx }) => ({ apiToken: signApiToken(ctx.userId, ctx.app.sessionSecret) })),
});
