import { createOrderOperation } from "~/server/orders/create-order";
import { restRoute } from "~/server/rest/rest-route";

export const POST = restRoute(createOrderOperation);
