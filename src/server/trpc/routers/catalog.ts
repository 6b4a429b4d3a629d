import { listCatalog } from "~/server/catalog/queries";
import { router, shopperProcedure } from "~/server/trpc/init";

export const catalogRouter = router({
  list: shopperProcedure.query(({ ctx }) => listCatalog(ctx.app.db)),
});
