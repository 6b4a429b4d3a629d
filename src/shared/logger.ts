import pino from "pino";
import pretty from "pino-pretty";
import { getEnv } from "~/env";

/** Keys that must never reach a log line, whatever object is logged. */
export const REDACTED_PATHS = [
  "*.password",
  "*.secret",
  "*.webhookSecret",
  "*.sessionSecret",
  "*.token",
  "*.apiToken",
  "*.authorization",
  "*.cookie",
  "headers.cookie",
  "headers.authorization",
];

export function createLogger(
  level: string,
  human: boolean,
  destination?: pino.DestinationStream,
): pino.Logger {
  const options = {
    level,
    base: { app: "checkout" },
    redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
  };
  if (human)
    return pino(options, pretty({ colorize: true, translateTime: "HH:MM:ss.l", ignore: "pid,hostname,app" }));
  return destination ? pino(options, destination) : pino(options);
}

let cached: pino.Logger | undefined;

/** JSON lines in production and tests, human-readable in development, unless LOG_FORMAT says which. */
export function getLogger(): pino.Logger {
  const env = getEnv();
  cached ??= createLogger(
    env.LOG_LEVEL,
    (env.LOG_FORMAT ?? (env.NODE_ENV === "development" ? "pretty" : "json")) === "pretty",
  );
  return cached;
}
