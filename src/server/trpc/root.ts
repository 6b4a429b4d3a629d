import { createCallerFactory, router } from "./init";
import { catalogRouter } from "./routers/catalog";
import { checkoutRouter } from "./routers/checkout";
import { couponsRouter } from "./routers/coupons";
import { ordersRouter } from "./routers/orders";
import { paymentsRouter } from "./routers/payments";
import { refundsRouter } from "./routers/refunds";
import { sessionRouter } from "./routers/session";

export const appRouter = router({
  catalog: catalogRouter,
  checkout: checkoutRouter,
  coupons: couponsRouter,
  orders: ordersRouter,
  payments: paymentsRouter,
  refunds: refundsRouter,
  session: sessionRouter,
});

export type AppRouter = typeof appRouter;
export const createCaller = createCallerFactory(appRouter);
