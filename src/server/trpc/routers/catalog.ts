import { listCatalog } from "../../catalog/queries";
import { router, shopperProcedure } from "../init";

export const catalogRouter = router({
  list: shopperProcedure.query(({ ctx }) => listCatalog(ctx.app.db)),
});
