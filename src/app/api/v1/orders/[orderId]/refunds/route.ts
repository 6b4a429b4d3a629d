import { createRefundOperation } from "~/server/refunds/create-refund";
import { restRoute } from "~/server/rest/rest-route";

export const POST = restRoute(createRefundOperation);
