import { createOrderOperation } from "~/server/orders/create-order";
import { router } from "~/server/trpc/init";
import { mutationOf } from "~/server/trpc/mutation";

/**
 * The old name of `orders.create`, kept for clients built against it for one release (docs/api.md,
 * "Deprecated names"): the same operation, so a key sent under either name is one key.
 */
export const checkoutRouter = router({
  /** @deprecated Use `orders.create`. */
  createOrder: mutationOf(createOrderOperation, { deprecatedFor: "orders.create" }),
});
