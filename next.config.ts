import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  poweredByHeader: false,
  // Node-only libraries used by route handlers; bundling them gains nothing.
  serverExternalPackages: ["pino", "postgres", "graphile-worker", "pg"],
};

export default nextConfig;
