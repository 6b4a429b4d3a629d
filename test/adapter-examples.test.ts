import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { pgClient } from "~/shared/postgres-driver";
import * as expressExample from "../examples/express/server";
import * as fastifyExample from "../examples/fastify/server";
import * as honoExample from "../examples/hono/server";
import { type Profile, runConformance, type Scenario } from "../scripts/lib/conformance/run";
import { databaseUrl } from "./support/names";

/**
 * The core's framework adapters (packages/idempotency/src/adapters), each mounted by its example on an empty
 * database: copies of one request at once make one transfer and one answer, a refusal is stored and replayed,
 * and a key reused with another request, a missing or malformed key and an invalid body are problem details.
 */
const adminUrl = inject("pgAdminUrl");
const database = `adapters_${randomBytes(4).toString("hex")}`;
let sql: postgres.Sql;

beforeAll(async () => {
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  await admin.end();
  sql = pgClient(databaseUrl(adminUrl, database), { max: 20, onnotice: () => {} });
});
afterAll(async () => {
  await sql?.end();
  const admin = pgClient(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

async function listening(server: Server): Promise<{ base: string; close: () => Promise<void> }> {
  if (!server.listening) await new Promise((resolve) => server.once("listening", resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const FRAMEWORKS = {
  express: {
    table: "express_transfer",
    start: async () => {
      await expressExample.createTables(sql);
      return listening(expressExample.createApp(sql).listen(0, "127.0.0.1"));
    },
  },
  fastify: {
    table: "fastify_transfer",
    start: async () => {
      await fastifyExample.createTables(sql);
      const app = fastifyExample.createApp(sql);
      await app.listen({ port: 0, host: "127.0.0.1" });
      return listening(app.server);
    },
  },
  hono: {
    table: "hono_transfer",
    start: async () => {
      await honoExample.createTables(sql);
      return listening(
        serve({ fetch: honoExample.createApp(sql).fetch, port: 0, hostname: "127.0.0.1" }) as Server,
      );
    },
  },
};

describe.each(Object.entries(FRAMEWORKS))("the %s adapter", (_name, framework) => {
  let base: string;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ base, close } = await framework.start());
  });
  afterAll(() => close?.());

  const post = (key: string | undefined, body: unknown, account = "alice") =>
    fetch(`${base}/transfers`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-account": account,
        ...(key !== undefined ? { "idempotency-key": key } : {}),
      },
      body: JSON.stringify(body),
    });
  const transfers = async (account: string) =>
    (await sql.unsafe(`SELECT count(*)::int AS n FROM ${framework.table} WHERE account = $1`, [account]))[0]
      ?.n;

  it("answers 30 copies of one request sent at once with one transfer and one answer", async () => {
    const account = randomUUID();
    const key = `"${randomUUID()}"`;
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => post(key, { to: "bob", amount: 5 }, account)),
    );
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 201));
    expect(new Set(await Promise.all(answers.map((answer) => answer.text()))).size).toBe(1);
    expect(answers.filter((answer) => answer.headers.get("idempotent-replayed") === "true")).toHaveLength(29);
    expect(await transfers(account)).toBe(1);
  });

  it("stores a declared refusal and replays it; another request under the key is 422", async () => {
    const account = randomUUID();
    const key = randomUUID();
    const first = await post(key, { to: "bob", amount: 5000 }, account);
    expect(first.status).toBe(422);
    expect(first.headers.get("content-type")).toContain("application/problem+json");
    expect(await first.json()).toMatchObject({ code: "OVER_LIMIT", status: 422 });
    const again = await post(key, { to: "bob", amount: 5000 }, account);
    expect(again.status).toBe(422);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const other = await post(key, { to: "carol", amount: 5 }, account);
    expect(other.status).toBe(422);
    expect(await other.json()).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    expect(await transfers(account)).toBe(0);
  });

  it("passes the conformance kit under the transfer-example profile", async () => {
    const { scenarios } = JSON.parse(readFileSync("conformance/scenarios.json", "utf8")) as {
      scenarios: Scenario[];
    };
    const profile = JSON.parse(readFileSync("conformance/profiles/transfer-example.json", "utf8")) as Profile;
    const verdicts = await runConformance(base, profile, scenarios);
    expect(verdicts.filter((verdict) => verdict.result === "fail")).toEqual([]);
    // The examples publish no expiry policy: that one scenario is not applicable.
    expect(verdicts.filter((verdict) => verdict.result === "n/a").map((verdict) => verdict.id)).toEqual([
      "expiry-policy",
    ]);
  });

  it("refuses a missing or malformed key and an invalid body with a 400 problem, and runs nothing", async () => {
    const account = randomUUID();
    for (const [key, body, code] of [
      [undefined, { to: "bob", amount: 5 }, "IDEMPOTENCY_KEY_MISSING"],
      ['"unterminated', { to: "bob", amount: 5 }, "IDEMPOTENCY_KEY_INVALID"],
      ["a, b", { to: "bob", amount: 5 }, "IDEMPOTENCY_KEY_INVALID"],
      [randomUUID(), { to: "bob", amount: -1 }, "REQUEST_INVALID"],
    ] as const) {
      const answer = await post(key, body, account);
      expect(answer.status, code).toBe(400);
      expect(answer.headers.get("content-type")).toContain("application/problem+json");
      expect(await answer.json()).toMatchObject({
        type: "about:blank",
        title: "Bad Request",
        status: 400,
        code,
      });
    }
    expect(await transfers(account)).toBe(0);
  });
});
