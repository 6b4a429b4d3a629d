import { existsSync } from "node:fs";
import { embeddedDatabaseUrl } from "~/env";

/** The end-to-end app runs beside a developer's own (port 3000, embedded PG 54329). */
export const E2E_PORT = 3100;
export const E2E_PG_PORT = 54339;
export const E2E_DATA_DIR = ".data/e2e-postgres";
export const E2E_ADMIN_TOKEN = "e2e-admin-token-0123456789abcdefghijklm";
export const E2E_BASE_URL = `http://127.0.0.1:${E2E_PORT}`;

export function e2eDatabaseUrl(external: string | undefined): string {
  return external ?? embeddedDatabaseUrl(E2E_PG_PORT, "checkout", E2E_DATA_DIR);
}

/**
 * Browser downloads do not work everywhere: prefer CHROMIUM_PATH, then Debian's
 * chromium, then Playwright's own browser for anyone who installed it.
 */
export function chromiumExecutable(fromEnv: string | undefined): string | undefined {
  return [fromEnv, "/usr/bin/chromium", "/usr/bin/chromium-browser"].find(
    (candidate): candidate is string => !!candidate && existsSync(candidate),
  );
}
