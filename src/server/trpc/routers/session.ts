import { issueApiToken, revokeCredentials } from "~/server/session/api-tokens";
import { router, shopperProcedure } from "~/server/trpc/init";

/**
 * The shopper's REST API tokens. A token is shown only when the shopper asks for one (never
 * handed to page JavaScript unasked, where an XSS could read it), expires after
 * API_TOKEN_TTL_HOURS. "Sign out everywhere else" revokes every token and every session cookie
 * issued so far, wherever it was copied to; this browser gets a fresh cookie and stays the same shopper.
 */
export const sessionRouter = router({
  issueApiToken: shopperProcedure.mutation(({ ctx }) =>
    issueApiToken(ctx.userId, ctx.app.sessionSecret, ctx.app.apiTokenTtlS),
  ),
  revokeAll: shopperProcedure.mutation(async ({ ctx }) => {
    const revokedAt = await revokeCredentials(ctx.app.db, ctx.userId);
    ctx.renewSession?.(revokedAt.getTime());
    return { revokedAt };
  }),
});
