export { default } from "~/mockpay/pages/pay-page";

export const dynamic = "force-dynamic";
