import { createRefundOperation } from "~/server/refunds/create-refund";
import { restRoute } from "~/server/rest/operation";

export const POST = restRoute(createRefundOperation);
