import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgClient } from "~/server/db/client";
import { createPool } from "~/shared/postgres-driver";
import { type ActorRun, explore } from "../scripts/lib/interleavings/explore";
import { type Gate, startGate } from "../scripts/lib/interleavings/gate";
import { createTestDatabase, type TestDatabase } from "./support/database";

/**
 * The permutation harness (scripts/lib/interleavings) on two small transactions whose answer is known: a
 * read-then-write increment loses an update in some schedule, and the harness must find that schedule;
 * the same increment that locks its row first loses none in any.
 */
let t: TestDatabase;
let gates: Gate[];
let pools: ReturnType<typeof createPool>[];

beforeAll(async () => {
  t = await createTestDatabase();
  await t.sql`CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)`;
  gates = [await startGate(t.url), await startGate(t.url)];
  pools = gates.map((gate) => createPool(gate.url, { max: 1 }));
  for (const pool of pools) await pool`SELECT 1`;
});
afterAll(async () => {
  for (const pool of pools) await pool.end();
  for (const gate of gates) await gate.close();
  await t.drop();
});

async function exploreIncrements(lockFirst: boolean, bound: number) {
  const control = pgClient(t.url, { max: 1 });
  try {
    return await explore({
      bound,
      maxSchedules: 200,
      batch: 1,
      control,
      begin: async () => {
        await t.sql`INSERT INTO counter VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET n = 0`;
        const actors: ActorRun[] = pools.map((pool, i) => ({
          name: `incrementer ${i + 1}`,
          gate: gates[i] as Gate,
          act: () =>
            pool.begin(async (sql) => {
              const [row] = lockFirst
                ? await sql<{ n: number }[]>`SELECT n FROM counter WHERE id = 1 FOR UPDATE`
                : await sql<{ n: number }[]>`SELECT n FROM counter WHERE id = 1`;
              await sql`UPDATE counter SET n = ${(row?.n ?? 0) + 1} WHERE id = 1`;
            }),
        }));
        return { world: undefined, actors };
      },
      check: async () => {
        const [row] = await t.sql<{ n: number }[]>`SELECT n FROM counter WHERE id = 1`;
        return row?.n === 2 ? [] : [`lost an update: n = ${row?.n}`];
      },
      checkBatch: async () => {},
    });
  } finally {
    await control.end();
  }
}

describe("the permutation harness", () => {
  it("finds the schedule that loses an update of a read-then-write increment, naming its steps", async () => {
    const found = await exploreIncrements(false, 2);
    expect(found.bad.length).toBeGreaterThan(0);
    expect(found.capped).toBe(false);
    expect(found.diverged).toBe(0);
    console.log(`read-then-write: ${found.schedules} schedules, ${found.bad.length} bad`);
    // In every bad schedule, both read before the first commit.
    for (const { run } of found.bad) {
      const at = (actor: number, verb: string) =>
        run.trace.findIndex((step) => step.actor === `incrementer ${actor}` && step.text.startsWith(verb));
      expect(Math.max(at(1, "SELECT"), at(2, "SELECT"))).toBeLessThan(
        Math.min(at(1, "commit"), at(2, "commit")),
      );
    }
    expect(found.bad[0]?.problems).toEqual(["lost an update: n = 1"]);
  });

  it("finds none when the increment locks its row first, and sees the second wait on the lock", async () => {
    const found = await exploreIncrements(true, 2);
    expect(found.bad).toEqual([]);
    expect(found.schedules).toBeGreaterThan(3);
    expect(found.diverged).toBe(0);
  });
});
