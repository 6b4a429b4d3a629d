import { restDeps } from "~/server/rest/deps";
import { getOrder } from "~/server/rest/handlers";
import { plainRoute } from "~/shared/plain-http";

export const GET = plainRoute((req, params) => getOrder(restDeps(), req, params.orderId ?? ""));
