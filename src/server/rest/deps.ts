import { getAppContext } from "~/server/app-context";
import { getLogger } from "~/shared/logger";
import type { RestDeps } from "./protocol";

/** The running app's REST dependencies (route handlers call this). */
export function restDeps(): RestDeps {
  const app = getAppContext();
  return {
    app,
    tokensEnabled: app.apiTokensEnabled,
    logError: (err) => getLogger().error({ err }, "unhandled error in REST handler"),
  };
}
