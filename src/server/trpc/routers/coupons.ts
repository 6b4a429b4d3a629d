import { listCoupons } from "~/server/coupons/coupons";
import { router, shopperProcedure } from "~/server/trpc/init";

export const couponsRouter = router({
  list: shopperProcedure.query(({ ctx }) => listCoupons(ctx.app.db, ctx.userId)),
});
