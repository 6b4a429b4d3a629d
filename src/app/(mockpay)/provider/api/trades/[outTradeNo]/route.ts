import { tradeStatusRoute } from "~/mockpay/routes";

export const GET = tradeStatusRoute;
