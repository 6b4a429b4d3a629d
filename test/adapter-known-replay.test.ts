import { randomUUID } from "node:crypto";
import {
  answerIdempotently,
  DEFAULT_IDEMPOTENCY_CONFIG,
  type IdempotencyConfig,
  type IdempotentRoute,
  postgresStore,
  ReplayCache,
  recordSchema,
  requestInvalid,
} from "@exactly-once/idempotency";
import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The HTTP binding's known replay (`IdempotentRoute.requestText`): a copy whose text this instance answered
 * before is answered with that answer's text, without the route's operation; anything else runs it.
 */
const NAMES = { table: "known_replay_key", storeOutcome: "known_replay_key_store_outcome" };
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 10 });
  await t.sql.unsafe(recordSchema(NAMES));
  await t.sql`CREATE TABLE known_replay_transfer (id serial PRIMARY KEY, amount int)`;
});
afterAll(async () => {
  await t.drop();
});

interface Req {
  text: string;
  key: string;
}

function binding(requestText: boolean) {
  const store = postgresStore(t.sql, NAMES);
  const config: IdempotencyConfig = { ...DEFAULT_IDEMPOTENCY_CONFIG, cache: new ReplayCache() };
  const operations = { count: 0 };
  const route: IdempotentRoute<unknown, postgres.ReservedSql, Req> = {
    bizType: "transfer.create",
    status: 201,
    scope: () => "caller",
    ...(requestText ? { requestText: (req: Req) => req.text } : {}),
    operation: (req) => {
      operations.count++;
      const { amount } = JSON.parse(req.text) as { amount?: unknown };
      if (!Number.isInteger(amount)) throw requestInvalid("amount");
      return {
        request: { amount },
        execute: async (tx: postgres.ReservedSql) => {
          const [row] =
            await tx`INSERT INTO known_replay_transfer (amount) VALUES (${amount as number}) RETURNING id`;
          return { result: { transferId: row?.id, amount } };
        },
      };
    },
  };
  const send = (req: Req) =>
    answerIdempotently(store, config, route, req, { keyField: req.key, scope: "caller" });
  return { send, operations };
}

describe("the HTTP binding's known replay", () => {
  it("answers a copy of a text it answered before with that answer's text, without running the operation", async () => {
    const { send, operations } = binding(true);
    const key = randomUUID();
    const request = { key, text: JSON.stringify({ amount: 5 }) };
    const first = await send(request);
    expect(first.status).toBe(201);
    expect(first.headers["idempotent-replayed"]).toBeUndefined();
    // The first replay reads the outcome (the operation validates the request, the core checks its fingerprint)
    // and keeps its text; every later copy of the same text is answered from that.
    const replay = await send(request);
    expect(operations.count).toBe(2);
    const copies = await Promise.all(Array.from({ length: 20 }, () => send(request)));
    expect(operations.count).toBe(2);
    for (const copy of [replay, ...copies]) {
      expect(copy).toEqual({
        status: 201,
        headers: { "content-type": "application/json", "idempotent-replayed": "true" },
        body: first.body,
      });
    }
    const [{ n }] = (await t.sql`SELECT count(*)::int AS n FROM known_replay_transfer`) as unknown as [
      { n: number },
    ];
    expect(n).toBe(1);
  });

  it("runs the operation for another text under the same key: the reuse is refused, never replayed", async () => {
    const { send, operations } = binding(true);
    const key = randomUUID();
    await send({ key, text: JSON.stringify({ amount: 7 }) });
    await send({ key, text: JSON.stringify({ amount: 7 }) });
    const reused = await send({ key, text: JSON.stringify({ amount: 8 }) });
    expect(operations.count).toBe(3);
    expect(reused.status).toBe(422);
    expect(JSON.parse(reused.body)).toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
  });

  it("without requestText, every copy runs the operation", async () => {
    const { send, operations } = binding(false);
    const request = { key: randomUUID(), text: JSON.stringify({ amount: 9 }) };
    for (let i = 0; i < 4; i++) await send(request);
    expect(operations.count).toBe(4);
  });
});
