export { default, metadata } from "~/mockpay/pages/layout";
