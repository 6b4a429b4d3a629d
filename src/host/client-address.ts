import type { IncomingMessage } from "node:http";
import type { TLSSocket } from "node:tls";
import proxyAddr from "proxy-addr";
import { CLIENT_ADDRESS_HEADER, CLIENT_PROTO_HEADER } from "~/shared/client-address";

type Trust = (address: string, hop: number) => boolean;

/**
 * TRUST_PROXY, compiled: nothing by default (the socket's peer is the client), a
 * number of hops, or addresses and subnets (proxy-addr's names: loopback,
 * linklocal, uniquelocal).
 */
export function compileTrust(setting: string): Trust {
  const value = setting.trim();
  if (value === "" || value === "false" || value === "0") return () => false;
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    return (_address, hop) => hop < hops;
  }
  return proxyAddr.compile(value.split(",").map((part) => part.trim()));
}

/**
 * Stamps the request with who the client is, overwriting whatever the client
 * sent under those names: its address (X-Forwarded-For is believed only through
 * trusted proxies) and whether it came over https (X-Forwarded-Proto likewise).
 */
export function stampClient(req: IncomingMessage, trust: Trust): void {
  const peer = req.socket.remoteAddress ?? "unknown";
  const address = req.socket.remoteAddress ? proxyAddr(req, trust) : peer;
  const viaProxy = trust(peer, 0);
  const forwardedProto = req.headers["x-forwarded-proto"];
  const proto = (req.socket as TLSSocket).encrypted
    ? "https"
    : viaProxy && typeof forwardedProto === "string"
      ? (forwardedProto.split(",")[0]?.trim().toLowerCase() ?? "http")
      : "http";
  req.headers[CLIENT_ADDRESS_HEADER] = address;
  req.headers[CLIENT_PROTO_HEADER] = proto === "https" ? "https" : "http";
}
