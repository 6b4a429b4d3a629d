import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { pgClient } from "~/shared/postgres-driver";
import { createApp, createTables, forgetExpired } from "../examples/plain-node/server";
import { databaseUrl } from "./support/names";

/**
 * The core lifted out of the app: examples/plain-node mounts packages/idempotency/src in a bare node:http server, on an
 * empty database with its own record table (recordSchema) and one operation. The same storms as the app's.
 */
const adminUrl = inject("pgAdminUrl");
const name = `plain_node_${randomBytes(4).toString("hex")}`;
let sql: postgres.Sql;
let base: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  // A plain postgres.js pool (pgClient only reads the test server's socket address from its URL).
  sql = pgClient(databaseUrl(adminUrl, name), { max: 20, onnotice: () => {} });
  await createTables(sql);
  const server = createApp(sql).listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise((resolve) => server.close(() => resolve()));
});
afterAll(async () => {
  await close?.();
  await sql?.end();
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
});

const transfer = (key: string | undefined, body: unknown, account = "alice") =>
  fetch(`${base}/transfers`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-account": account,
      ...(key ? { "idempotency-key": key } : {}),
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  }).then(async (res) => ({
    status: res.status,
    replayed: res.headers.get("idempotent-replayed"),
    body: (await res.json()) as { transferId?: number; code?: string },
  }));

const transfers = async (key: string) =>
  (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM transfer WHERE recipient = ${key}`)[0]?.n;

describe("examples/plain-node: the core in a bare node:http server", () => {
  it("is short and takes nothing from the app: node:http, postgres.js and the core by its package name", () => {
    const text = readFileSync("examples/plain-node/server.ts", "utf8");
    expect(text.split("\n").length).toBeLessThan(80);
    const imports = [...text.matchAll(/from "([^"]+)"/g)].map((m) => m[1]);
    expect(imports).toEqual(["node:http", "@exactly-once/idempotency", "postgres"]);
  });

  it("40 copies of one transfer at once: one transfer, one answer, one first", async () => {
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => transfer(key, { to: key, amount: 5 })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(40).fill(201));
    expect(new Set(answers.map((a) => a.body.transferId)).size).toBe(1);
    expect(answers.filter((a) => a.replayed === "false")).toHaveLength(1);
    expect(await transfers(key)).toBe(1);
    const [record] = await sql`SELECT status FROM example_key WHERE idempotency_key = ${key}`;
    expect(record?.status).toBe("SUCCESS");
  });

  it("a declared refusal is stored once and answered to every copy; nothing moves", async () => {
    const key = randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => transfer(key, { to: key, amount: 5000 })),
    );
    expect(new Set(answers.map((a) => `${a.status} ${a.body.code}`))).toEqual(new Set(["422 OVER_LIMIT"]));
    expect(await transfers(key)).toBe(0);
    const [record] = await sql`SELECT status FROM example_key WHERE idempotency_key = ${key}`;
    expect(record?.status).toBe("FAILED");
  });

  it("the key with another payload is refused; another account's same key is its own", async () => {
    const key = randomUUID();
    expect((await transfer(key, { to: key, amount: 5 })).status).toBe(201);
    const other = await transfer(key, { to: key, amount: 6 });
    expect(other).toMatchObject({ status: 422, body: { code: "IDEMPOTENCY_KEY_REUSED" } });
    expect((await transfer(key, { to: key, amount: 5 }, "bob")).replayed).toBe("false");
    expect(await transfers(key)).toBe(2);
  });

  it("bad input is a 4xx and changes nothing", async () => {
    const key = randomUUID();
    expect((await transfer(undefined, { to: key, amount: 5 })).status).toBe(400);
    expect((await transfer(key, "{not json")).status).toBe(400);
    expect((await transfer(key, { to: key, amount: -1 })).status).toBe(400);
    expect(await transfers(key)).toBe(0);
    expect(await sql`SELECT 1 FROM example_key WHERE idempotency_key = ${key}`).toHaveLength(0);
  });

  it("forgets an expired key with the core's deleteExpired, and keeps a live one; the key then runs anew", async () => {
    const [expired, live] = [randomUUID(), randomUUID()];
    for (const key of [expired, live]) expect((await transfer(key, { to: key, amount: 5 })).status).toBe(201);
    await sql`UPDATE example_key SET expires_at = now() - interval '1 second' WHERE idempotency_key = ${expired}`;
    expect(await forgetExpired(sql)).toBe(1);
    expect(
      await sql`SELECT idempotency_key FROM example_key WHERE idempotency_key IN (${expired}, ${live})`,
    ).toEqual([{ idempotency_key: live }]);
    // Forgotten, the key is a new request: a second transfer (the business's own key is the client's to keep).
    const again = await transfer(expired, { to: expired, amount: 5 });
    expect(again.replayed).toBe("false");
    expect(await transfers(expired)).toBe(2);
  });
});
