import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { TRADE_MACHINE } from "~/mockpay/server/machine";
import { MACHINES } from "~/server/db/machines";

/**
 * The state machines are data (src/server/db/machines.ts), and the code's status writes take their states
 * from them: a status written any other way bypasses the table (and the model checker that reads it). Read
 * as text, every TypeScript file under src/server: no `status: "…"` in a drizzle `.set()` or `.values()`, no
 * `SET status = '…'` and no quoted state among an INSERT's VALUES. And every transition of a table is used by
 * the code, so the tables do not describe transitions nobody makes.
 */

const SERVER = path.resolve("src/server");
/** The idempotency core writes the record's statuses (packages/idempotency/src). */
const CORE = path.resolve("packages/idempotency/src");
const MOCKPAY = path.resolve("src/mockpay/server");

function sources(dir: string): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    if (!entry.name.endsWith(".ts") || entry.name.endsWith(".test.ts")) return [];
    return [{ file: path.relative(process.cwd(), full), text: readFileSync(full, "utf8") }];
  });
}

const STATES = [...new Set(MACHINES.flatMap((machine) => machine.states))];
const QUOTED_STATE = new RegExp(`'(${STATES.join("|")})'`);
const BYPASSES: { what: string; pattern: RegExp }[] = [
  { what: "a literal status in .set()", pattern: /\.set\(\{[^)]*?\bstatus:\s*["'`]/gs },
  { what: "a literal status in .values()", pattern: /\.values\(\{[^)]*?\bstatus:\s*["'`]/gs },
  { what: "SET status = '…'", pattern: /\bSET\b(?:(?!\bWHERE\b)[^`])*?\bstatus\s*=\s*'[A-Z_]+'/g },
  {
    what: "a quoted state among an INSERT's VALUES",
    pattern: new RegExp(`\\bVALUES\\s*\\([^)]*${QUOTED_STATE.source}`, "g"),
  },
];

/** MockPay's other tables (deliveries, refunds) have statuses of their own; its trade's are the machine's. */
const TRADE_BYPASSES: { what: string; pattern: RegExp }[] = [
  {
    what: "a literal trade status written",
    pattern: /\.(?:update|insert)\(providerTrade\)\s*\.(?:set|values)\(\{[^)]*?\bstatus:\s*["'`]/gs,
  },
];

function bypasses(files: { file: string; text: string }[], patterns = BYPASSES): string[] {
  return files
    .filter(({ file }) => !isMachineTable(file))
    .flatMap(({ file, text }) =>
      patterns.flatMap(({ what, pattern }) =>
        [...text.matchAll(pattern)].map((match) => {
          const line = text.slice(0, match.index).split("\n").length;
          return `${file}:${line}: ${what}`;
        }),
      ),
    );
}

/** Where the tables themselves are written. */
function isMachineTable(file: string): boolean {
  return (
    file.endsWith(path.join("db", "machines.ts")) || file.endsWith(path.join("idempotency", "machine.ts"))
  );
}

describe("the state machines as data", () => {
  const files = [...sources(SERVER), ...sources(CORE)];

  it("no status is written in src/server other than from a machine's transition", () => {
    expect(bypasses(files)).toEqual([]);
  });

  it("MockPay writes its trade's status only from the trade's machine", () => {
    expect(bypasses(sources(MOCKPAY), TRADE_BYPASSES)).toEqual([]);
    const planted = 'await tx.update(providerTrade).set({ status: "PAID", paidAt: sql`now()` })';
    expect(bypasses([{ file: "planted.ts", text: planted }], TRADE_BYPASSES)).toEqual([
      "planted.ts:1: a literal trade status written",
    ]);
    const code = sources(MOCKPAY)
      .map((f) => f.text)
      .join("\n");
    expect(
      Object.keys(TRADE_MACHINE.transitions).filter(
        (name) => !new RegExp(`(\\b(TRADE|transitions)\\.${name}\\b)`).test(code),
      ),
    ).toEqual([]);
  });

  it("the check finds each way of writing a status around the tables", () => {
    // Source text as it would be written, placeholders and all.
    const planted = [
      'await tx.update(orders).set({ status: "SHIPPED", updatedAt: sql`now()` })',
      "await tx.insert(paymentOrder).values({ userId, status: 'PENDING' })",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: source text, not a template
      "sql`UPDATE refund_order SET updated_at = now(), status = 'REFUND_FAILED' WHERE id = ${id}`",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: source text, not a template
      "sql`INSERT INTO idempotency_record (user_id, status) VALUES (${scope}, 'PROCESSING')`",
    ];
    expect(
      bypasses(planted.map((text, i) => ({ file: `planted-${i}.ts`, text }))).map((b) => b.split(": ")[1]),
    ).toEqual([
      "a literal status in .set()",
      "a literal status in .values()",
      "SET status = '…'",
      "a quoted state among an INSERT's VALUES",
    ]);
    // Reads and conditions are not writes.
    expect(bypasses([{ file: "reads.ts", text: "sql`SELECT 1 FROM orders WHERE status = 'PAID'`" }])).toEqual(
      [],
    );
  });

  it("every transition of every table is made somewhere in the code", () => {
    const code = files
      .filter(({ file }) => !isMachineTable(file))
      .map((f) => f.text)
      .join("\n");
    const unused = MACHINES.flatMap((machine) =>
      Object.keys(machine.transitions)
        .filter((name) => !new RegExp(`(\\.${name}\\b|"${name}"|\\b${name}\\.(to|from)\\b)`).test(code))
        .map((name) => `${machine.name}.${name}`),
    );
    expect(unused).toEqual([]);
  });

  it("each table names only its own states, and every state is reached by some transition", () => {
    for (const machine of MACHINES) {
      const reached = new Set(Object.values(machine.transitions).map((t) => (t as { to: string }).to));
      expect(
        machine.states.filter((state) => !reached.has(state)),
        machine.name,
      ).toEqual(machine.name === "payment" ? ["FAILED"] : []);
    }
  });
});
