import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  poweredByHeader: false,
  // Node-only libraries used by route handlers; bundling them gains nothing. rate-limiter-flexible picks its
  // store with a require Next's dev bundler cannot follow ("expression is too dynamic"): bundled, the gateway's
  // store failed on every request under `npm run dev` and the gateway was silently off.
  serverExternalPackages: [
    "pino",
    "pino-pretty",
    "postgres",
    "graphile-worker",
    "pg",
    "prom-client",
    "rate-limiter-flexible",
  ],
};

export default nextConfig;
