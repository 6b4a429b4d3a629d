import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { restRoute } from "~/server/rest/operation";

export const POST = restRoute(cancelOrderOperation);
