import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { pgClient } from "~/shared/postgres-driver";
import { databaseUrl } from "./support/names";

/**
 * The core as a user gets it: packages/idempotency built, packed by `npm pack`, installed from its tarball into
 * an empty project (postgres.js beside it, its peer), and run there by its package name against PostgreSQL;
 * a TypeScript consumer of it compiles under Node's own module resolution (nodenext).
 */
const repo = process.cwd();
const project = mkdtempSync(path.join(tmpdir(), "lift-the-core-"));
const adminUrl = inject("pgAdminUrl");
const database = `lifted_${randomBytes(4).toString("hex")}`;
const run = (file: string, args: string[], cwd = project) =>
  execFileSync(file, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

const CONSUMER = `
import * as core from "@exactly-once/idempotency";
import postgres from "postgres";

// The test server may be reached by a Unix socket, given libpq's way (?host=/folder).
const url = new URL(process.argv[2]);
const socket = url.searchParams.get("host");
url.searchParams.delete("host");
const sql = postgres(url.toString(), { max: 10, onnotice: () => {}, ...(socket ? { host: socket } : {}) });
const names = { table: "lifted_key", storeOutcome: "lifted_key_store_outcome" };
await sql.unsafe(core.recordSchema(names));
await sql\`CREATE TABLE IF NOT EXISTS lifted_effect (id serial PRIMARY KEY, key text)\`;
const store = core.postgresStore(sql, names);
const op = {
  scope: "someone",
  bizType: "effect.create",
  key: "one-key",
  request: { what: "an effect" },
  execute: async (tx) => {
    const [row] = await tx\`INSERT INTO lifted_effect (key) VALUES ('one-key') RETURNING id\`;
    return { result: { effectId: row.id } };
  },
};
const answers = await Promise.all(Array.from({ length: 20 }, () => core.runIdempotent(store, op)));
const adapters = await Promise.all(["express", "fastify", "hono"].map((name) => import(\`@exactly-once/idempotency/\${name}\`)));
const [{ n }] = await sql\`SELECT count(*)::int AS n FROM lifted_effect\`;
console.log(JSON.stringify({
  effects: n,
  answers: new Set(answers.map((a) => JSON.stringify(a.result))).size,
  replayed: answers.filter((a) => a.replayed).length,
  adapters: adapters.map((adapter) => Object.keys(adapter).join()),
}));
await sql.end();
`;

const TYPED_CONSUMER = `
import { type IdempotencyConfig, type RecordStore, runIdempotent } from "@exactly-once/idempotency";
import { idempotentExpress } from "@exactly-once/idempotency/express";
import type postgres from "postgres";

export const handler = (store: RecordStore<postgres.ReservedSql>) =>
  idempotentExpress(store, undefined, {
    bizType: "effect.create",
    scope: () => "someone",
    operation: () => ({ request: {}, execute: async () => ({ result: 1 }) }),
  });

export async function once(store: RecordStore<postgres.ReservedSql>, config: IdempotencyConfig): Promise<number> {
  const answer = await runIdempotent(store, {
    scope: "someone",
    bizType: "effect.create",
    key: "k",
    request: {},
    execute: async () => ({ result: 1 }),
  }, config);
  return answer.result;
}
`;

beforeAll(async () => {
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  await admin.end();
  run(process.execPath, [path.join(repo, "packages/idempotency/build.mjs")], repo);
  const packed = path.join(project, "packed");
  mkdirSync(packed);
  run(
    "npm",
    ["pack", path.join(repo, "packages/idempotency"), "--pack-destination", packed, "--silent"],
    repo,
  );
  const [tarball] = readdirSync(packed).filter((name) => name.endsWith(".tgz"));
  writeFileSync(
    path.join(project, "package.json"),
    JSON.stringify({ name: "lifted", private: true, type: "module" }),
  );
  run("npm", [
    "install",
    path.join(packed, tarball ?? "missing.tgz"),
    "--offline",
    "--no-audit",
    "--no-fund",
    "--legacy-peer-deps",
    "--ignore-scripts",
  ]);
  // Its peer and the types a TypeScript consumer needs, as the project's own dependencies would be.
  mkdirSync(path.join(project, "node_modules/@types"), { recursive: true });
  symlinkSync(path.join(repo, "node_modules/postgres"), path.join(project, "node_modules/postgres"));
  symlinkSync(path.join(repo, "node_modules/@types/node"), path.join(project, "node_modules/@types/node"));
  writeFileSync(path.join(project, "consumer.mjs"), CONSUMER);
  writeFileSync(path.join(project, "consumer.ts"), TYPED_CONSUMER);
}, 120_000);

afterAll(async () => {
  rmSync(project, { recursive: true, force: true });
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

describe("the core installed from its npm pack tarball into an empty project", () => {
  it("holds only its build: an ES module and declarations, no source and no tests", () => {
    const installed = path.join(project, "node_modules/@exactly-once/idempotency");
    expect(readdirSync(installed).sort()).toEqual(["README.md", "dist", "package.json"]);
    const dist = readdirSync(path.join(installed, "dist"));
    expect(dist).toContain("index.js");
    expect(dist).toContain("index.d.ts");
    expect(
      dist.filter((name) => name.endsWith(".test.d.ts") || (name.endsWith(".ts") && !name.endsWith(".d.ts"))),
    ).toEqual([]);
  });

  it("runs 20 copies of one key at once by its package name: one effect, one answer; its adapters load", () => {
    const out = run(process.execPath, ["consumer.mjs", databaseUrl(adminUrl, database)]);
    expect(JSON.parse(out.trim())).toEqual({
      effects: 1,
      answers: 1,
      replayed: 19,
      adapters: ["idempotentExpress", "idempotentFastify", "idempotentHono"],
    });
  });

  it("types a TypeScript consumer under Node's module resolution", () => {
    const tsc = path.join(repo, "node_modules/typescript/bin/tsc");
    const out = run(process.execPath, [
      tsc,
      "--noEmit",
      "--strict",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
      "--target",
      "es2022",
      "--types",
      "node",
      "consumer.ts",
    ]);
    expect(out).toBe("");
  });
});
