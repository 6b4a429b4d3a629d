import { createOrderOperation } from "~/server/orders/create-order";
import { router } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/operation";

export const checkoutRouter = router({
  createOrder: mutationOf(createOrderOperation),
});
