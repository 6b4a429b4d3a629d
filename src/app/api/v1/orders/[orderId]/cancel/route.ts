import { cancelOrderOperation } from "~/server/orders/cancel-order";
import { restRoute } from "~/server/rest/rest-route";

export const POST = restRoute(cancelOrderOperation);
