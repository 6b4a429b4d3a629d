import { adminTradeRoute } from "~/mockpay/routes";

export const POST = adminTradeRoute;
