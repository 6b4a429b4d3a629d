import { createCallerFactory, router } from "./init";
import { catalogRouter } from "./routers/catalog";
import { checkoutRouter } from "./routers/checkout";
import { ordersRouter } from "./routers/orders";
import { paymentsRouter } from "./routers/payments";

export const appRouter = router({
  catalog: catalogRouter,
  checkout: checkoutRouter,
  orders: ordersRouter,
  payments: paymentsRouter,
});

export type AppRouter = typeof appRouter;
export const createCaller = createCallerFactory(appRouter);
