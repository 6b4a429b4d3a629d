import { adminEndpointRoute } from "~/mockpay/routes";

export const POST = adminEndpointRoute;
