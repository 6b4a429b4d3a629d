import { createPaymentOperation } from "~/server/payments/create-payment";
import { restRoute } from "~/server/rest/rest-route";

export const POST = restRoute(createPaymentOperation);
