import { createOrderOperation } from "~/server/orders/create-order";
import { restRoute } from "~/server/rest/operation";

export const POST = restRoute(createOrderOperation);
