import { createPaymentOperation } from "~/server/payments/create-payment";
import { restRoute } from "~/server/rest/operation";

export const POST = restRoute(createPaymentOperation);
