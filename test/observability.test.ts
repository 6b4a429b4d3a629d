import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import {
  alertsFrom,
  opsFigures,
  RECONCILIATION_FIRST_DUE_S,
  RECONCILIATION_STALE_S,
} from "~/server/admin/alerts";
import { renderMetrics } from "~/server/admin/metrics";
import type { AppContext } from "~/server/app-context";
import { createTelemetry, type IdempotencyEvent, MinuteSeries } from "~/server/observability/observer";
import { runIdempotent } from "~/server/operations";
import { createOrder, createOrderOperation } from "~/server/orders/create-order";
import { createPayment } from "~/server/payments/create-payment";
import { handlePaymentNotification } from "~/server/payments/notification-receive";
import { lastReconciliation, reconcileWhenDue } from "~/server/reconciliation/reconcile";
import { handleOperation } from "~/server/rest/rest-route";
import { signApiToken } from "~/server/session/session";
import { createCaller } from "~/server/trpc/root";
import { createLogger } from "~/shared/logger";
import { signBody } from "~/shared/provider-contract";
import type { TestDatabase } from "./support/database";
import { test } from "./support/fixtures";
import { sourceFiles } from "./support/source-files";

let t: TestDatabase;
let app: AppContext;

// The database and the app's dependencies come from the file's fixtures (test/support/fixtures.ts).
test.beforeAll(({ database, app: wired }) => {
  t = database;
  app = wired;
});

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { lines, log: createLogger("info", false, stream) };
}

describe("observability", () => {
  it("reports every idempotent call's outcome: first, replayed, mismatch", async () => {
    const events: IdempotencyEvent[] = [];
    const config = { ...app.idempotency, observe: (e: IdempotencyEvent) => events.push(e) };
    const userId = randomUUID();
    const input = { requestId: randomUUID(), items: [{ skuId: "SKU-MUG", quantity: 1 }] };
    await createOrder(t.db, userId, input, { idempotency: config });
    await createOrder(t.db, userId, input, { idempotency: config });
    await expect(
      createOrder(
        t.db,
        userId,
        { ...input, items: [{ skuId: "SKU-MUG", quantity: 2 }] },
        { idempotency: config },
      ),
    ).rejects.toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
    await expect(
      runIdempotent(
        t.db,
        {
          scope: userId,
          bizType: "test.op",
          key: "k-observed-1",
          request: {},
          storedErrors: [],
          execute: () => Promise.reject(new Error("boom")),
        },
        config,
      ),
    ).rejects.toThrow("boom");
    expect(events.map((e) => [e.bizType, e.outcome])).toEqual([
      ["order.create", "first"],
      ["order.create", "replayed"],
      ["order.create", "mismatch"],
      ["test.op", "released"],
    ]);
    expect(events.every((e) => e.key && e.durationMs >= 0)).toBe(true);
  });

  it("hands the observer the request each call served, over REST and over tRPC", async () => {
    const seen: { key: string; outcome: string; requestId?: string }[] = [];
    const watched: AppContext = {
      ...app,
      idempotency: {
        ...app.idempotency,
        observe: (event, requestId) => seen.push({ key: event.key, outcome: event.outcome, requestId }),
      },
    };
    const userId = randomUUID();
    const key = randomUUID();
    const body = JSON.stringify({ items: [{ skuId: "SKU-MUG", quantity: 1 }] });
    const post = (requestId: string) =>
      handleOperation(
        { app: watched, tokensEnabled: true, logError: () => {} },
        createOrderOperation,
        new Request("http://test/api/v1/orders", {
          method: "POST",
          headers: {
            authorization: `Bearer ${signApiToken(userId, app.sessionSecret)}`,
            "idempotency-key": key,
            "content-type": "application/json",
            "x-request-id": requestId,
          },
          body,
        }),
      );
    expect((await post("rest-1")).status).toBe(201);
    expect((await post("rest-2")).status).toBe(201);
    const trpcKey = randomUUID();
    await createCaller({ app: watched, userId, requestId: "trpc-1" }).orders.create({
      requestId: trpcKey,
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    expect(seen).toEqual([
      { key, outcome: "first", requestId: "rest-1" },
      { key, outcome: "replayed", requestId: "rest-2" },
      { key: trpcKey, outcome: "first", requestId: "trpc-1" },
    ]);
  });

  it("keeps no request context for the process: no module of the server or of the core imports async_hooks", () => {
    // AsyncLocalStorage turns on Node 20's promise hooks, which then run on every promise of the process:
    // 13–17 % of a first execution's instructions and 20–27 % of a replay's (docs/benchmark.md, "The request id").
    const importing = [...sourceFiles("src"), ...sourceFiles("packages/idempotency/src")].filter((file) =>
      /(from |import\(|require\()["'](node:)?async_hooks["']/.test(readFileSync(file, "utf8")),
    );
    expect(importing).toEqual([]);
  });

  it("logs structured lines with key and outcome, counts them for Prometheus, and never logs secrets", async () => {
    const { lines, log } = capture();
    const telemetry = createTelemetry(log);
    telemetry.observer.idempotency(
      { bizType: "order.create", key: "k-1", scope: "u", outcome: "replayed", durationMs: 3 },
      "req-42",
    );
    telemetry.observer.notification({
      outcome: "AMOUNT_MISMATCH",
      type: "payment.succeeded",
      notificationId: "evt_1",
      deliveryId: "d1",
      outTradeNo: "P1",
      alert: true,
    });
    log.info(
      { config: { webhookSecret: "whsec_leak", token: "ck_leak" }, headers: { authorization: "Bearer x" } },
      "x",
    );
    const parsed = lines.map((l) => JSON.parse(l));
    expect(parsed[0]).toMatchObject({
      level: 30,
      requestId: "req-42",
      bizType: "order.create",
      idempotencyKey: "k-1",
      outcome: "replayed",
    });
    expect(parsed[1]).toMatchObject({ level: 50, outcome: "AMOUNT_MISMATCH" });
    expect(lines.join("\n")).not.toMatch(/whsec_leak|ck_leak|Bearer x/);

    const text = await renderMetrics(t.db, telemetry.registry);
    expect(text).toContain(
      'checkout_idempotent_requests_total{biz_type="order.create",outcome="replayed"} 1',
    );
    expect(text).toContain('checkout_payment_notifications_total{outcome="AMOUNT_MISMATCH"} 1');
    expect(text).toMatch(/checkout_outbox_lag_seconds \d/);
    expect(text).toMatch(/checkout_reconciliation_violations \d/);
  });

  it("reconciles once per period for the whole fleet, however many workers try at once; the alert log and /api/metrics read the last one kept", async () => {
    // A period long enough that these calls never straddle two (slots are epoch-aligned).
    const period = 1_000_000;
    expect(await lastReconciliation(t.db)).toBeNull();
    // None kept yet: right after start-up that is no alert; a period (and a minute) after, it is one.
    const none = await opsFigures(t.db, null, Date.now(), Date.now());
    expect(none.reconciliationAgeSeconds).toBeNull();
    expect(alertsFrom(none).map((a) => a.name)).not.toContain("reconciliation_stale");
    const neverKept = await opsFigures(
      t.db,
      null,
      Date.now(),
      Date.now() - (RECONCILIATION_FIRST_DUE_S + 1) * 1000,
    );
    expect(alertsFrom(neverKept).map((a) => a.name)).toContain("reconciliation_stale");
    expect(RECONCILIATION_FIRST_DUE_S).toBe(2 * 60);

    const periods = { everyMin: period, fullEveryMin: period };
    const runs = await Promise.all(Array.from({ length: 8 }, () => reconcileWhenDue(t.db, periods)));
    // One full run in the period; an incremental one only if it came after the full one had finished (one run
    // at a time).
    const ran = runs.filter((run) => run !== null);
    expect(ran.filter((run) => run.kind === "full")).toHaveLength(1);
    expect(ran.filter((run) => run.kind !== "full").map((run) => run.kind)).toEqual(
      ran.length === 2 ? ["incremental"] : [],
    );
    expect(await t.sql`SELECT count(*)::int AS n FROM reconciliation_report`).toEqual([{ n: ran.length }]);
    // The incremental one, if the batch did not run it; then both claimed: another try reads nothing.
    if (ran.length === 1) {
      const incremental = await reconcileWhenDue(t.db, periods);
      expect(incremental?.kind).toBe("incremental");
      ran.push(incremental as NonNullable<typeof incremental>);
    }
    expect(await reconcileWhenDue(t.db, periods)).toBeNull();

    const kept = await lastReconciliation(t.db);
    const last = ran.sort((a, b) => b.checkedAt.getTime() - a.checkedAt.getTime())[0];
    expect(kept?.checkedAt.getTime()).toBe(last?.checkedAt.getTime());
    expect(kept?.invariants).toEqual(JSON.parse(JSON.stringify(last?.invariants)));
    const figures = await opsFigures(t.db, kept);
    expect(figures.reconciliationAgeSeconds).toBeLessThan(60);
    expect(await renderMetrics(t.db, new Registry())).toMatch(/checkout_reconciliation_age_seconds \d/);

    // The worker's runs stopped: past three periods of 1 minute, an alert.
    const old = { ...(kept as NonNullable<typeof kept>), checkedAt: new Date(Date.now() - 4 * 60_000) };
    expect(alertsFrom(await opsFigures(t.db, old)).map((a) => a.name)).toContain("reconciliation_stale");
    expect(RECONCILIATION_STALE_S).toBe(3 * 60);
  });

  it("a reconciliation that fails gives its period back for another try", async () => {
    await t.sql`DELETE FROM reconciliation_report`;
    // A negative sample size makes every check's query fail (LIMIT must not be negative).
    await expect(
      reconcileWhenDue(t.db, { everyMin: 1_000_000, fullEveryMin: 1_000_000 }, { sampleSize: -1 }),
    ).rejects.toThrow();
    expect(await t.sql`SELECT count(*)::int AS n FROM reconciliation_report`).toEqual([{ n: 0 }]);
    expect(await reconcileWhenDue(t.db, { everyMin: 1_000_000, fullEveryMin: 1_000_000 })).not.toBeNull();
    expect(
      await t.sql`SELECT count(*)::int AS n FROM reconciliation_report WHERE checked_at IS NOT NULL`,
    ).toEqual([{ n: 1 }]);
  });

  it("raises alerts a person must see: an amount mismatch, stuck PROCESSING records", async () => {
    const userId = randomUUID();
    const order = await createOrder(t.db, userId, {
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const payment = await createPayment(t.db, userId, { orderId: order.orderId }, app.payments);
    const body = JSON.stringify({
      id: "evt_wrong_amount",
      type: "payment.succeeded",
      app_id: app.payments.appId,
      out_trade_no: payment.outTradeNo,
      transaction_id: "T-wrong",
      amount_cents: 1,
      currency: "USD",
      created_at: new Date().toISOString(),
    });
    await handlePaymentNotification(
      t.db,
      {
        body,
        signature: signBody("notification", app.payments.webhookSecret, body, Math.floor(Date.now() / 1000)),
        deliveryId: "d",
      },
      app.payments,
    );
    await t.sql`
      INSERT INTO idempotency_record (user_id, biz_type, idempotency_key, fingerprint, status, locked_until, expires_at)
      VALUES ('u', 'order.create', 'stuck-1', 'f', 'PROCESSING', now() - interval '1 minute', now() + interval '1 day')`;
    const alerts = alertsFrom(await opsFigures(t.db)).map((a) => a.name);
    expect(alerts).toEqual(expect.arrayContaining(["amount_mismatch", "stuck_processing", "reconciliation"]));
  });

  it("names the delivery of a notification that fails its signature check, as it was sent", async () => {
    const { lines, log } = capture();
    const telemetry = createTelemetry(log);
    const answer = await handlePaymentNotification(
      t.db,
      { body: "{}", signature: "t=1,v1=forged", deliveryId: "delivery-unverified-7" },
      { ...app.payments, observer: telemetry.observer },
    );
    expect(answer.httpStatus).toBe(401);
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({ deliveryId: "delivery-unverified-7", notificationId: null }),
    ]);
  });

  it("keeps per-minute series for the charts", () => {
    const series = new MinuteSeries();
    const now = Date.UTC(2026, 0, 1, 12, 0, 30);
    series.add("x", now - 120_000);
    series.add("x", now);
    series.add("x", now);
    expect(series.last("x", 3, now).map((p) => p.count)).toEqual([1, 0, 2]);
  });
});
