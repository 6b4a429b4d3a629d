export { default } from "~/mockpay/pages/admin-page";

export const dynamic = "force-dynamic";
