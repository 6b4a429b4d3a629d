import { syncStalePayments } from "~/server/payments/status-query";
import { describe, expect, test } from "./support/fixtures";
import { orderAwaitingPayment } from "./support/scenarios";

/** Lost notifications are found by asking MockPay; no payment may starve behind abandoned ones. */
describe("the status query's schedule", () => {
  test("finds a new payment whose notifications were all lost on time, behind 500 abandoned ones", async ({
    app,
    mockPay,
    database,
  }) => {
    // 500 payments abandoned an hour ago, asked three times already and due again now.
    await database.sql`
      WITH made AS (
        INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, currency, created_at)
        SELECT gen_random_uuid()::text, 'abandoned-' || g, 'test', 1250, 'USD', now() - interval '1 hour'
          FROM generate_series(1, 500) g
        RETURNING user_id, id, created_at)
      INSERT INTO payment_order (user_id, order_id, out_trade_no, amount_cents, currency, created_at,
                                 query_attempts, next_query_at, last_queried_at)
      SELECT user_id, id, 'PABANDONED' || replace(id::text, '-', ''), 1250, 'USD', created_at,
             3, now() - interval '1 second', now() - interval '4 minutes'
        FROM made`;

    // A new payment, paid at MockPay, whose notifications never arrive; made 31 s ago (due now).
    const { orderId, payment, confirm } = await orderAwaitingPayment(app, mockPay);
    await confirm();
    await database.sql`UPDATE payment_order SET created_at = now() - interval '31 seconds'
                        WHERE out_trade_no = ${payment.outTradeNo}`;

    // One round of the job (20 at a time) asks about the new payment first.
    const round = await syncStalePayments(app.db, app.payments, { olderThanS: 30, limit: 20 });
    expect(round.map((r) => r.outTradeNo)).toContain(payment.outTradeNo);
    const [order] = await database.sql`SELECT status FROM orders WHERE id = ${orderId}`;
    expect(order?.status).toBe("PAID");

    // The abandoned ones back off: each asked again only after twice as long as the last wait.
    const [asked] = await database.sql<{ attempts: number; wait_s: number }[]>`
      SELECT query_attempts AS attempts, round(extract(epoch FROM next_query_at - last_queried_at))::int AS wait_s
        FROM payment_order WHERE out_trade_no LIKE 'PABANDONED%' AND query_attempts = 4 LIMIT 1`;
    expect(asked).toEqual({ attempts: 4, wait_s: 240 });
    // And a paid payment leaves the schedule.
    const again = await syncStalePayments(app.db, app.payments, { olderThanS: 30, limit: 600 });
    expect(again.map((r) => r.outTradeNo)).not.toContain(payment.outTradeNo);
  });
});
