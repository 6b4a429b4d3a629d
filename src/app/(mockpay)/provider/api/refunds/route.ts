import { refundsRoute } from "~/mockpay/routes";

export const POST = refundsRoute;
