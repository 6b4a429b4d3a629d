import { closesRoute } from "~/mockpay/routes";

export const POST = closesRoute;
