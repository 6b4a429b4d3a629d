import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { confirmTrade, openTrade } from "~/mockpay/server/trades";
import { submitPendingRefunds } from "~/server/refunds/submit";
import { createCaller } from "~/server/trpc/root";
import { payRequestSchema } from "~/shared/provider-contract";
import { History, type ProcessHistory, parseHistory, readHistory } from "../scripts/lib/chaos/history";
import { checkHistory, formatAnomaly } from "../scripts/lib/chaos/history-check";
import { describe, expect, test } from "./support/fixtures";
import { consumeOrderEvents, deliverAll, scarceSku } from "./support/scenarios";

/**
 * The chaos run's history checker (issue 25, part 3), on a history written the way the chaos client writes
 * one, of a real shopper's story against PostgreSQL and MockPay: it finds nothing in the true history, and
 * names the key and the lines of each thing wrong in a corrupted one.
 */

const codeOf = (error: unknown) => (error as { cause?: { code?: string } }).cause?.code ?? String(error);

/** Calls `call` as one attempt in the history: ok with its answer, or fail with its domain code. */
async function attempt<T>(
  h: ProcessHistory,
  user: string,
  f: string,
  key: string,
  input: unknown,
  call: () => Promise<T>,
): Promise<T | undefined> {
  const op = h.invoke(f, key, user, input);
  try {
    const value = await call();
    op.ok(value, user);
    return value;
  } catch (error) {
    op.fail(codeOf(error), user);
    return undefined;
  }
}

describe("the history checker", () => {
  let text = "";
  const keys = { paid: "", refund: "", lost: "", neverRan: "", refused: "", cancelled: "" };
  const trades = { paid: "", cancelled: "" };

  test("a true history of a shopper's story: every operation checked, no anomaly", async ({
    app,
    mockPay,
  }) => {
    const history = new History();
    const h = history.for("shopper 0");
    const user = randomUUID();
    const caller = createCaller({ app, userId: user, requestId: randomUUID() });
    const items = [{ skuId: "SKU-MUG", quantity: 2 }];

    // A double click on Place order: two attempts, one key, both answered with the order.
    keys.paid = `order-${randomUUID()}`;
    const placed = await Promise.all(
      [0, 1].map(() =>
        attempt(h, user, "orders.create", keys.paid, { requestId: keys.paid, items }, () =>
          caller.orders.create({ requestId: keys.paid, items }),
        ),
      ),
    );
    const orderId = placed[0]?.orderId as string;
    const payment = await attempt(h, user, "payments.create", orderId, { orderId }, () =>
      caller.payments.create({ orderId }),
    );
    if (!payment) throw new Error("no payment");
    trades.paid = payment.outTradeNo;
    const { sig, ...request } = payRequestSchema.parse(
      Object.fromEntries(new URL(payment.payUrl, "http://x").searchParams),
    );
    await openTrade(mockPay.db, request, sig, mockPay.webhookSecret);
    const confirm = h.invoke("mockpay.confirm", payment.outTradeNo, user, {});
    await confirmTrade(mockPay.db, mockPay.appId, payment.outTradeNo);
    confirm.ok({ status: 303 }, user);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, orderId);

    // A partial refund, asked twice at once.
    keys.refund = `refund-${randomUUID()}`;
    const refundInput = { orderId, refundNo: keys.refund, amountCents: 100 };
    await Promise.all(
      [0, 1].map(() =>
        attempt(h, user, "refunds.create", keys.refund, refundInput, () =>
          caller.refunds.create(refundInput),
        ),
      ),
    );
    await submitPendingRefunds(app.db, app.payments);
    await deliverAll(mockPay);
    await consumeOrderEvents(app.db, orderId);

    // An answer lost after the server committed (resolved: with its effect), and an attempt that never
    // reached the server (resolved: without).
    keys.lost = `order-${randomUUID()}`;
    const lost = h.invoke("orders.create", keys.lost, user, { requestId: keys.lost, items });
    await caller.orders.create({ requestId: keys.lost, items });
    lost.info({ lost: "the answer was thrown away after the server sent it" }, user);
    keys.neverRan = `order-${randomUUID()}`;
    h.invoke("orders.create", keys.neverRan, user, { requestId: keys.neverRan, items }).info(
      { error: "TimeoutError" },
      user,
    );

    // A refusal the operation stores: more than the stock.
    const scarce = await scarceSku(app.db, 1);
    keys.refused = `order-${randomUUID()}`;
    const tooMany = [{ skuId: scarce, quantity: 2 }];
    await attempt(h, user, "orders.create", keys.refused, { requestId: keys.refused, items: tooMany }, () =>
      caller.orders.create({ requestId: keys.refused, items: tooMany }),
    );

    // An order cancelled before paying: its pay link opened, the trade closed.
    keys.cancelled = `order-${randomUUID()}`;
    const unpaid = await attempt(
      h,
      user,
      "orders.create",
      keys.cancelled,
      { requestId: keys.cancelled, items },
      () => caller.orders.create({ requestId: keys.cancelled, items }),
    );
    const unpaidId = unpaid?.orderId as string;
    const unpaidPayment = await caller.payments.create({ orderId: unpaidId });
    trades.cancelled = unpaidPayment.outTradeNo;
    const link = payRequestSchema.parse(
      Object.fromEntries(new URL(unpaidPayment.payUrl, "http://x").searchParams),
    );
    const { sig: unpaidSig, ...unpaidRequest } = link;
    await openTrade(mockPay.db, unpaidRequest, unpaidSig, mockPay.webhookSecret);
    await attempt(h, user, "orders.cancel", unpaidId, { orderId: unpaidId }, () =>
      caller.orders.cancel({ orderId: unpaidId }),
    );

    const file = path.join(mkdtempSync(path.join(tmpdir(), "history-")), "history.jsonl");
    history.save(file);
    const verdict = await checkHistory(app.db, readHistory(file));
    expect(verdict.anomalies.map(formatAnomaly)).toEqual([]);
    expect(verdict).toMatchObject({
      operations: 11,
      unknown: 2,
      unknownResolved: { withEffect: 1, without: 1 },
    });
    text = (await import("node:fs")).readFileSync(file, "utf8");
    expect(text.split("\n").filter(Boolean)).toHaveLength(22);
  });

  /** The lines of the true history, as objects to corrupt. */
  const events = () =>
    text
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  const check = async (app: Parameters<typeof checkHistory>[0], corrupted: Record<string, unknown>[]) =>
    (await checkHistory(app, parseHistory(corrupted.map((e) => JSON.stringify(e)).join("\n")))).anomalies.map(
      formatAnomaly,
    );
  const lineOf = (list: Record<string, unknown>[], match: (e: Record<string, unknown>) => boolean) =>
    list.findIndex(match) + 1;

  test("an answer that names another order: the key's answers disagree, and the database disagrees", async ({
    app,
  }) => {
    const list = events();
    const second = list.filter((e) => e.key === keys.paid && e.type === "ok")[1] as Record<string, unknown>;
    second.value = { ...(second.value as object), orderId: randomUUID() };
    const found = await check(app.db, list);
    const line = list.indexOf(second) + 1;
    expect(found).toContainEqual(
      expect.stringMatching(
        new RegExp(`^orders.create ${keys.paid}: answers disagree: order .*history lines .*\\b${line}\\b`),
      ),
    );
  });

  test("a completion whose invoke is missing, and one completed twice", async ({ app }) => {
    const list = events();
    const invoke = lineOf(list, (e) => e.key === keys.refund && e.type === "invoke");
    const dropped = list.filter((_, i) => i !== invoke - 1);
    expect(await check(app.db, dropped)).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^refunds.create ${keys.refund}: a completion \\(ok\\) of operation \\d+ that was never invoked`,
        ),
      ),
    );
    const ok = list.find((e) => e.key === keys.cancelled && e.type === "ok") as Record<string, unknown>;
    const twice = [...list, { ...ok, type: "fail", value: { code: "ORDER_NOT_CANCELLABLE" } }];
    expect(await check(app.db, twice)).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^orders.create ${keys.cancelled}: operation \\d+ completed twice \\(ok, then fail\\) \\[history lines \\d+, ${twice.length}\\]`,
        ),
      ),
    );
  });

  test("an acknowledged order that does not exist, and a refused key whose order does", async ({ app }) => {
    const list = events();
    const refused = list.find((e) => e.key === keys.refused && e.type === "fail") as Record<string, unknown>;
    Object.assign(refused, { type: "ok", value: { orderId: randomUUID(), amountCents: 3740 } });
    const placed = list.filter((e) => e.key === keys.lost);
    for (const e of placed)
      if (e.type !== "invoke") Object.assign(e, { type: "fail", value: { code: "SKU_NOT_FOUND" } });
    const found = await check(app.db, list);
    expect(found).toContainEqual(
      expect.stringMatching(
        new RegExp(`^orders.create ${keys.refused}: acknowledged order \\S+ does not exist`),
      ),
    );
    expect(found).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^orders.create ${keys.lost}: every attempt was refused \\(SKU_NOT_FOUND\\), yet order \\S+ exists`,
        ),
      ),
    );
  });

  test("an order holding other lines than its request asked for", async ({ app }) => {
    const list = events();
    const invoke = list.find((e) => e.key === keys.cancelled && e.type === "invoke") as Record<
      string,
      unknown
    >;
    invoke.value = { requestId: keys.cancelled, items: [{ skuId: "SKU-MUG", quantity: 3 }] };
    expect(await check(app.db, list)).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^orders.create ${keys.cancelled}: order \\S+ holds SKU-MUG×2; the request asked for SKU-MUG×3`,
        ),
      ),
    );
  });

  test("a cancel told CLOSED on an order that is not, and answers to one cancel that disagree", async ({
    app,
  }) => {
    const list = events();
    const orderId = String(
      (list.find((e) => e.key === keys.paid && e.type === "ok")?.value as { orderId?: string } | undefined)
        ?.orderId,
    );
    list.push(
      { op: 900, process: "shopper 0", type: "invoke", f: "orders.cancel", key: orderId, user: "", at: 0 },
      {
        op: 900,
        process: "shopper 0",
        type: "ok",
        f: "orders.cancel",
        key: orderId,
        user: "",
        value: { status: "CLOSED" },
        at: 0,
      },
      { op: 901, process: "shopper 0", type: "invoke", f: "orders.cancel", key: orderId, user: "", at: 0 },
      {
        op: 901,
        process: "shopper 0",
        type: "fail",
        f: "orders.cancel",
        key: orderId,
        user: "",
        value: { code: "ORDER_NOT_CANCELLABLE" },
        at: 0,
      },
    );
    const found = await check(app.db, list);
    expect(found).toContainEqual(
      expect.stringMatching(
        new RegExp(`^orders.cancel ${orderId}: the cancel answered CLOSED; the order is SHIPPED`),
      ),
    );
    expect(found).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^orders.cancel ${orderId}: cancels of one order answered CLOSED and ORDER_NOT_CANCELLABLE`,
        ),
      ),
    );
  });

  test("the server's evidence for a key: two copies that took effect, and an absorbed copy that does not say what absorbed it", async ({
    app,
    database,
  }) => {
    const user = String(events().find((e) => e.key === keys.paid)?.user);
    const row = (outcome: string, second: string, absorbedBy = "") =>
      database.sql`INSERT INTO duplicate_attempt (layer, scope, subject, key, outcome, absorbed_by, second, count)
                   VALUES ('service', ${user}, 'order.create', ${keys.paid}, ${outcome}, ${absorbedBy}, ${second}::timestamptz, 1)`;
    await row("first", "2026-12-05T10:00:00Z");
    await row("replayed", "2026-12-05T10:00:00Z", "the idempotency record (its stored answer)");
    expect(await check(app.db, events())).toEqual([]);
    await row("first", "2026-12-05T10:00:01Z");
    await row("replayed", "2026-12-05T10:00:01Z");
    try {
      const found = await check(app.db, events());
      expect(found).toEqual([
        expect.stringMatching(
          new RegExp(`^orders.create ${keys.paid}: the server's attempt log has 2 copies that took effect`),
        ),
        expect.stringMatching(
          new RegExp(
            `^orders.create ${keys.paid}: the server's attempt log has 1 absorbed copies that do not say what absorbed them`,
          ),
        ),
      ]);
    } finally {
      await database.sql`DELETE FROM duplicate_attempt WHERE key = ${keys.paid}`;
    }
  });

  test("money: MockPay refunding other than the merchant recorded, and capturing a cancelled order's trade", async ({
    app,
    database,
  }) => {
    const [before] = await database.sql<{ status: string }[]>`
      SELECT status FROM provider_trade WHERE out_trade_no = ${trades.cancelled}`;
    await database.sql`UPDATE provider_refund SET amount_cents = amount_cents + 1
                        WHERE trade_id = (SELECT id FROM provider_trade WHERE out_trade_no = ${trades.paid})`;
    await database.sql`UPDATE provider_trade SET status = 'PAID' WHERE out_trade_no = ${trades.cancelled}`;
    try {
      const found = await check(app.db, events());
      expect(found).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^money \\S+: MockPay refunded 101 of trade ${trades.paid}; the merchant recorded 100 refunded`,
          ),
        ),
      );
      expect(found).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^mockpay.confirm ${trades.cancelled}: MockPay captured it; the merchant's payment is CLOSED with 0 captures in its ledger`,
          ),
        ),
      );
      expect(found).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^money \\S+: trade ${trades.cancelled} \\(CLOSED\\) still holds \\d+ of the shopper's money; the order is CLOSED`,
          ),
        ),
      );
    } finally {
      await database.sql`UPDATE provider_refund SET amount_cents = amount_cents - 1
                          WHERE trade_id = (SELECT id FROM provider_trade WHERE out_trade_no = ${trades.paid})`;
      await database.sql`UPDATE provider_trade SET status = ${before?.status ?? ""} WHERE out_trade_no = ${trades.cancelled}`;
    }
    expect(await check(app.db, events())).toEqual([]);
  });
});
