import { createOrderOperation } from "~/server/orders/create-order";
import { router } from "../init";
import { mutationOf } from "../operation";

export const checkoutRouter = router({
  createOrder: mutationOf(createOrderOperation),
});
