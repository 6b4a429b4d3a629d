import pino from "pino";
import { getEnv } from "../env";

let cached: pino.Logger | undefined;

export function getLogger(): pino.Logger {
  cached ??= pino({ level: getEnv().LOG_LEVEL, base: { app: "checkout" } });
  return cached;
}
