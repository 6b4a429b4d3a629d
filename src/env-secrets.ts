import { randomBytes } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** The secrets every instance must share, and nobody else may know. */
export const SECRET_NAMES = ["SESSION_SECRET", "PROVIDER_WEBHOOK_SECRET", "ADMIN_TOKEN"] as const;
export type SecretName = (typeof SECRET_NAMES)[number];
export type Secrets = Record<SecretName, string>;

/** The shortest secret production accepts: 32 characters (a random one has 43). */
export const MIN_PRODUCTION_SECRET_LENGTH = 32;

const HOW_TO_SET = "e.g. `openssl rand -base64 32`";

/**
 * In production every secret comes from the environment, long enough, or the app does not
 * start; the message names each variable to set. (There are no published defaults to fall
 * back on: a default in the source is a secret everyone knows.)
 */
export function productionSecretProblems(given: Partial<Record<SecretName, string>>): string[] {
  return SECRET_NAMES.flatMap((name) => {
    const value = given[name];
    if (value === undefined || value === "")
      return [`${name} is not set: set it in the environment (${HOW_TO_SET})`];
    if (value.length < MIN_PRODUCTION_SECRET_LENGTH) {
      return [
        `${name} is too short (${value.length} characters): use at least ${MIN_PRODUCTION_SECRET_LENGTH} (${HOW_TO_SET})`,
      ];
    }
    return [];
  });
}

/**
 * Outside production, the secrets the environment does not give are generated on first
 * start and kept in `file` (mode 600), so later starts, the worker and every other
 * process of this checkout share them. Two processes starting at once agree: the file
 * is written whole under another name and linked into place, which only one can do.
 */
export function localSecrets(file: string): Secrets {
  const existing = readSecrets(file);
  if (existing) return existing;
  // The folder keeps its default mode: the embedded PostgreSQL (another user, when run as root) lives beside it.
  mkdirSync(path.dirname(file), { recursive: true });
  const fresh = Object.fromEntries(
    SECRET_NAMES.map((name) => [name, randomBytes(32).toString("base64url")]),
  ) as Secrets;
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
  writeFileSync(temporary, `${JSON.stringify(fresh, null, 2)}\n`, { mode: 0o600 });
  try {
    linkSync(temporary, file);
    return fresh;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    const winner = readSecrets(file);
    if (!winner) throw new Error(`${file} holds no valid secrets; remove it to have new ones made`);
    return winner;
  } finally {
    rmSync(temporary, { force: true });
  }
}

function readSecrets(file: string): Secrets | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const parsed = JSON.parse(text) as Partial<Secrets>;
  if (!SECRET_NAMES.every((name) => typeof parsed[name] === "string" && (parsed[name]?.length ?? 0) >= 32)) {
    return undefined;
  }
  // Kept readable by the owner only, even if it was copied around.
  chmodSync(file, 0o600);
  return parsed as Secrets;
}
