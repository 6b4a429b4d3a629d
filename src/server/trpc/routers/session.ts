import { issueApiToken, revokeApiTokens } from "~/server/session/api-tokens";
import { router, shopperProcedure } from "~/server/trpc/init";

/**
 * The shopper's REST API tokens. A token is shown only when the shopper asks for one (never
 * handed to page JavaScript unasked, where an XSS could read it), expires after
 * API_TOKEN_TTL_HOURS, and every token can be revoked at once.
 */
export const sessionRouter = router({
  issueApiToken: shopperProcedure.mutation(({ ctx }) =>
    issueApiToken(ctx.userId, ctx.app.sessionSecret, ctx.app.apiTokenTtlS),
  ),
  revokeApiTokens: shopperProcedure.mutation(async ({ ctx }) => ({
    revokedAt: await revokeApiTokens(ctx.app.db, ctx.userId),
  })),
});
