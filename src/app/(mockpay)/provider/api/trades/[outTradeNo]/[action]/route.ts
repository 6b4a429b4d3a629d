import { tradeActionRoute } from "~/mockpay/routes";

export const POST = tradeActionRoute;
