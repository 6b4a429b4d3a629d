import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  poweredByHeader: false,
  // Node-only libraries used by route handlers; bundling them gains nothing.
  serverExternalPackages: ["pino", "pino-pretty", "postgres", "graphile-worker", "pg", "prom-client"],
};

export default nextConfig;
