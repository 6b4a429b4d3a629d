import { defineConfig, devices } from "@playwright/test";
import {
  chromiumExecutable,
  E2E_ADMIN_TOKEN,
  E2E_BASE_URL,
  E2E_DATA_DIR,
  E2E_PG_PORT,
  E2E_PORT,
} from "./e2e/support/config";

// Playwright's config is the one other place that reads the environment: it starts the app.
const env = process.env;

export default defineConfig({
  testDir: "e2e",
  testMatch: "**/*.spec.ts",
  fullyParallel: true,
  workers: 2,
  retries: 0,
  timeout: 60_000,
  expect: { timeout: 15_000 },
  reporter: env.CI ? [["list"], ["json", { outputFile: "reports/e2e-results.json" }]] : "list",
  use: {
    baseURL: E2E_BASE_URL,
    trace: "retain-on-failure",
    ...devices["Desktop Chrome"],
    launchOptions: {
      executablePath: chromiumExecutable(env.CHROMIUM_PATH),
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
  webServer: {
    command: "npx tsx scripts/start.ts --fresh",
    url: `${E2E_BASE_URL}/api/trpc/catalog.list`,
    reuseExistingServer: false,
    timeout: 240_000,
    stdout: "pipe",
    gracefulShutdown: { signal: "SIGTERM", timeout: 15_000 },
    env: {
      PORT: String(E2E_PORT),
      EMBEDDED_PG_PORT: String(E2E_PG_PORT),
      DATA_DIR: E2E_DATA_DIR,
      NEXT_TELEMETRY_DISABLED: "1",
      ADMIN_TOKEN: E2E_ADMIN_TOKEN,
      SESSION_SECRET: "e2e-session-secret-0123456789abcdefghijk",
      PROVIDER_WEBHOOK_SECRET: "whsec_e2e_0123456789abcdefghijklmnopqr",
      // Every test's fresh browser comes from 127.0.0.1 (test/security-limits.test.ts covers these limits).
      GATEWAY_IDENTITY_POINTS: "10000",
      GATEWAY_CLIENT_WRITE_POINTS: "10000",
    },
  },
});
