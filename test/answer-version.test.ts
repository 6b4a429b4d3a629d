import { randomUUID } from "node:crypto";
import { sql as dsql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  DEFAULT_IDEMPOTENCY_CONFIG,
  defineOperation,
  fingerprint,
  type IdempotentOperation,
  ReplayCache,
  runIdempotent,
  runOperation,
} from "~/server/operations";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { countEffects, createEffectTable, type EffectResult, effectOperation } from "./support/effects";

/**
 * Stored answers carry a version (issue 26): an answer an older deploy stored, in the shape it had then, still
 * replays after a deploy that changed the shape: read through the operation's declared upgrade, or as stored.
 * The old deploy here called the effect's id `id`; the new one calls it `effectId`.
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  await createEffectTable(t);
});
afterAll(() => t.drop());

type OldAnswer = { id: number; label: string };
const fromV1 = (stored: unknown): EffectResult => {
  const old = stored as OldAnswer;
  return { effectId: old.id, label: old.label };
};

/** What an older deploy left under the key: a success in version 1's shape. */
async function storedByOldDeploy(op: IdempotentOperation<unknown>, body: unknown) {
  await t.sql`
    INSERT INTO idempotency_record
           (user_id, biz_type, idempotency_key, fingerprint, status, response_body, answer_version, expires_at)
    VALUES (${op.scope}, ${op.bizType}, ${op.key}, ${fingerprint(op.bizType, op.request)}, 'SUCCESS',
            ${JSON.stringify(body)}::text::json, 1, now() + interval '1 hour')`;
}

describe("an answer stored in an older shape", () => {
  it("is read through the declared upgrade, from the record and then from the replay cache, and nothing runs again", async () => {
    const key = `v1-${randomUUID()}`;
    let upgrades = 0;
    const op = effectOperation("answer.upgrade", key, {
      answerVersion: 2,
      upgradeAnswer: (stored, version) => {
        upgrades++;
        expect(version).toBe(1);
        return fromV1(stored);
      },
    });
    await storedByOldDeploy(op, { id: 41, label: key });
    const config = { ...DEFAULT_IDEMPOTENCY_CONFIG, cache: new ReplayCache() };
    for (const from of ["the record", "the cache"]) {
      const answer = await runIdempotent(t.db, op, config);
      expect(answer, from).toMatchObject({ replayed: true, result: { effectId: 41, label: key } });
    }
    expect(upgrades).toBe(2);
    expect(await countEffects(t, key)).toBe(0);
  });

  it("is answered as stored when the operation declares no upgrade", async () => {
    const key = `v1-${randomUUID()}`;
    const op = effectOperation("answer.as-stored", key, { answerVersion: 2 });
    await storedByOldDeploy(op, { id: 7, label: key });
    const answer = await runIdempotent(t.db, op);
    expect(answer).toMatchObject({ replayed: true, result: { id: 7, label: key } });
    expect(await countEffects(t, key)).toBe(0);
  });

  it("an answer stored by this version, or a newer one (a rollback), is never upgraded", async () => {
    const key = `v2-${randomUUID()}`;
    let upgrades = 0;
    const upgradeAnswer = (stored: unknown) => {
      upgrades++;
      return fromV1(stored);
    };
    const op = effectOperation("answer.current", key, { answerVersion: 2, upgradeAnswer });
    const first = await runIdempotent(t.db, op);
    const again = await runIdempotent(t.db, op);
    expect(again).toMatchObject({ replayed: true, result: first.result });
    const [row] = await t.sql<{ answer_version: number }[]>`
      SELECT answer_version FROM idempotency_record WHERE idempotency_key = ${key}`;
    expect(row?.answer_version).toBe(2);
    // The deploy rolled back to version 1: the newer answer is replayed as stored.
    const older = await runIdempotent(t.db, { ...op, answerVersion: 1 });
    expect(older.result).toEqual(first.result);
    expect(upgrades).toBe(0);
    expect(await countEffects(t, key)).toBe(1);
  });

  it("an operation's declared answer version and upgrade apply to its result (what the record keeps is the whole execution)", async () => {
    const requestId = `op-${randomUUID()}`;
    const versioned = defineOperation({
      name: "answer.operation",
      input: z.object({ requestId: z.string(), label: z.string() }),
      key: {
        kind: "client",
        field: "requestId",
        absorbedBy: "the scratch table (never: every request is new)",
      },
      storedErrors: [],
      gateway: "off",
      answer: { version: 2, upgrade: (stored) => fromV1(stored) },
      execute: async (tx, input) => {
        const [row] = await tx.execute<{ id: number }>(
          dsql`INSERT INTO effect (label) VALUES (${input.label}) RETURNING id`,
        );
        return { result: { effectId: row?.id, label: input.label }, bizId: String(row?.id) };
      },
    });
    const userId = randomUUID();
    // Version 1 of this operation stored `{ result: { id, label }, bizId }` for the key.
    await storedByOldDeploy(
      {
        scope: userId,
        bizType: "answer.operation",
        key: requestId,
        request: { label: requestId },
        storedErrors: [],
        execute: async () => ({ result: undefined }),
      },
      { result: { id: 5, label: requestId }, bizId: "5" },
    );
    const answer = await runOperation(t.db, versioned, {
      userId,
      input: { requestId, label: requestId },
      deps: {},
    });
    expect(answer).toMatchObject({ effectId: 5, label: requestId, replayed: true });
    expect(await countEffects(t, requestId)).toBe(0);
  });
});
