import type { HeaderReader } from "./plain-http";
/**
 * What the production server (src/host/server.ts) tells the routes about the
 * client, in request headers it always overwrites: the address the gateway
 * limits by, and whether the client reached us over https (Secure cookies).
 * Under `npm run dev` there is no such server; then every client counts as one.
 */
export const CLIENT_ADDRESS_HEADER = "x-checkout-client-address";
export const CLIENT_PROTO_HEADER = "x-checkout-client-proto";

export function clientAddressOf(headers: HeaderReader): string {
  return headers.get(CLIENT_ADDRESS_HEADER) ?? "unknown";
}

export function isHttps(headers: HeaderReader): boolean {
  return headers.get(CLIENT_PROTO_HEADER) === "https";
}
