import { getEnv } from "~/env";
import { getAppContext } from "~/server/app-context";
import { getLogger } from "~/shared/logger";
import type { RestDeps } from "./http";

/** The running app's REST dependencies (route handlers call this). */
export function restDeps(): RestDeps {
  return {
    app: getAppContext(),
    tokensEnabled: getEnv().API_TOKENS_ENABLED,
    logError: (err) => getLogger().error({ err }, "unhandled error in REST handler"),
  };
}
