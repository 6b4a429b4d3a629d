import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { productionSecretProblems, SECRET_NAMES } from "~/env-secrets";

/**
 * No published default secrets: outside production the missing ones are generated on first
 * start and kept (mode 600); in production every one must come from the environment.
 */
const run = promisify(execFile);
const scratch = mkdtempSync(path.join(tmpdir(), "checkout-secrets-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The environment of a process that was given no secret at all. */
function withoutSecrets(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SECRET_NAMES) delete env[name];
  return { ...env, ...extra };
}

/** Runs one of the scripts and expects it to fail: its exit code and what it said. */
function failedRun(script: string, env: NodeJS.ProcessEnv) {
  return run(process.execPath, ["--import", "tsx", script], { env, timeout: 60_000 }).then(
    () => undefined,
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}

/** What getEnv() gives a fresh process (its secrets, and which it generated). */
async function secretsOfAFreshProcess(file: string, extra: Record<string, string> = {}) {
  const { stdout } = await run(
    process.execPath,
    [
      "--import",
      "tsx",
      "-e",
      `import("./src/env.ts").then(({ getEnv }) => { const e = getEnv();
         console.log(JSON.stringify({ s: e.SESSION_SECRET, w: e.PROVIDER_WEBHOOK_SECRET, a: e.ADMIN_TOKEN, g: e.generatedSecrets })); })`,
    ],
    { env: withoutSecrets({ NODE_ENV: "development", SECRETS_FILE: file, ...extra }) },
  );
  return JSON.parse(stdout.trim()) as { s: string; w: string; a: string; g: string[] };
}

describe("outside production", () => {
  it("generates random secrets on first start, keeps them with mode 600, and every later process reads the same", async () => {
    const file = path.join(scratch, "one", "secrets.json");
    const processes = await Promise.all(Array.from({ length: 6 }, () => secretsOfAFreshProcess(file)));
    const first = processes[0];
    expect(first?.g).toEqual(["SESSION_SECRET", "PROVIDER_WEBHOOK_SECRET", "ADMIN_TOKEN"]);
    expect(new Set([first?.s, first?.w, first?.a]).size).toBe(3);
    for (const secret of [first?.s, first?.w, first?.a]) expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Six processes starting at the same moment agree on one set.
    for (const other of processes) expect(other).toEqual(first);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The published defaults of old are gone.
    expect(JSON.stringify(first)).not.toMatch(/dev-only-session-secret|whsec_dev_only|dev-admin-token/);
    expect(await secretsOfAFreshProcess(file)).toEqual(first);
  });

  it("a secret given in the environment wins over the file, and only the missing ones are generated", async () => {
    const file = path.join(scratch, "two", "secrets.json");
    const given = "an-operator-chosen-session-secret-0123456789";
    const secrets = await secretsOfAFreshProcess(file, { SESSION_SECRET: given });
    expect(secrets.s).toBe(given);
    expect(secrets.g).toEqual(["PROVIDER_WEBHOOK_SECRET", "ADMIN_TOKEN"]);
  });
});

describe("in production", () => {
  it("names every secret that is missing or too short", () => {
    expect(productionSecretProblems({})).toEqual([
      expect.stringMatching(/^SESSION_SECRET is not set/),
      expect.stringMatching(/^PROVIDER_WEBHOOK_SECRET is not set/),
      expect.stringMatching(/^ADMIN_TOKEN is not set/),
    ]);
    expect(
      productionSecretProblems({
        SESSION_SECRET: "short",
        PROVIDER_WEBHOOK_SECRET: "w".repeat(32),
        ADMIN_TOKEN: "a".repeat(40),
      }),
    ).toEqual([expect.stringMatching(/^SESSION_SECRET is too short \(5 characters\): use at least 32/)]);
  });

  it("`NODE_ENV=production npm start` without secrets refuses to start and says which variables to set", async () => {
    const failure = await failedRun(
      "scripts/start.ts",
      withoutSecrets({ NODE_ENV: "production", SECRETS_FILE: path.join(scratch, "never.json") }),
    );
    expect(failure?.code).toBe(1);
    const said = `${failure?.stdout}${failure?.stderr}`;
    for (const name of SECRET_NAMES) expect(said).toContain(`${name} is not set`);
    // Nothing was generated for it to fall back on.
    expect(() => statSync(path.join(scratch, "never.json"))).toThrow();
  });

  it("`npm start` with a secret set too short by hand refuses before announcing anything", async () => {
    const failure = await failedRun(
      "scripts/start.ts",
      withoutSecrets({
        SESSION_SECRET: "long-enough-for-dev!",
        SECRETS_FILE: path.join(scratch, "short.json"),
      }),
    );
    expect(failure?.code).toBe(1);
    const said = `${failure?.stdout}${failure?.stderr}`;
    expect(said).toContain("SESSION_SECRET is too short (20 characters)");
    expect(said).not.toContain("serving on");
    expect(said).not.toContain("/admin?token=");
  });

  it("the production server itself refuses to start without them", async () => {
    const failure = await failedRun(
      "scripts/serve.ts",
      withoutSecrets({
        NODE_ENV: "production",
        PORT: "1",
        SECRETS_FILE: path.join(scratch, "never.json"),
      }),
    );
    expect(failure?.code).not.toBe(0);
    expect(`${failure?.stdout}${failure?.stderr}`).toContain("NODE_ENV=production needs its secrets");
  });
});
