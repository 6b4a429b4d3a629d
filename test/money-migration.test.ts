import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "~/server/operations";
import { type DatabaseBefore, databaseBefore } from "./support/migrations";

/**
 * Migration 0023 (the money ledger, issue 24) on a database holding orders, payments and refunds in every
 * state: each order gets the fingerprint its request had (so a request id reused after expiry is judged
 * against it), and the ledger opens with exactly what the state tables say has moved.
 */

let database: DatabaseBefore;

beforeAll(async () => {
  database = await databaseBefore(23, "checkout_money_migration");
});
afterAll(() => database?.drop());

describe("migration 0023: fingerprints and the ledger's opening entries", () => {
  it("fingerprints each order as the idempotency core does, and posts what has moved", async () => {
    const { sql } = database;
    await sql`INSERT INTO sku (id, name, price_cents, stock, initial_stock)
              VALUES ('SKU-B', 'B', 1000, 10, 10), ('SKU-A', 'A', 500, 10, 10)`;
    const order = async (user: string, n: number, status: string, lines: [string, number][]) => {
      const [row] = await sql<{ id: string }[]>`
        INSERT INTO orders (user_id, request_id, amount_cents, status) VALUES (${user}, ${`req-${n}`}, 2000, ${status})
        RETURNING id`;
      for (const [sku, quantity] of lines) {
        await sql`INSERT INTO order_item (user_id, order_id, sku_id, sku_name, quantity, unit_price_cents, line_total_cents)
                  VALUES (${user}, ${row?.id ?? ""}, ${sku}, ${sku}, ${quantity}, 1000, ${quantity * 1000})`;
      }
      return row?.id ?? "";
    };
    const payment = async (user: string, orderId: string, n: number, status: string) => {
      const [row] = await sql<{ id: string }[]>`
        INSERT INTO payment_order (user_id, order_id, out_trade_no, amount_cents, currency, status, transaction_id)
        VALUES (${user}, ${orderId}, ${`P-${n}`}, 2000, 'USD', ${status},
                ${status === "SUCCESS" || status === "PAID_LATE" ? `T-${n}` : null})
        RETURNING id`;
      return row?.id ?? "";
    };
    const refund = (
      user: string,
      orderId: string,
      paymentId: string,
      no: string,
      amount: number,
      status: string,
    ) =>
      sql`INSERT INTO refund_order (user_id, refund_no, provider_refund_no, order_id, payment_id, amount_cents, currency, status)
          VALUES (${user}, ${no}, ${`PR-${no}`}, ${orderId}, ${paymentId}, ${amount}, 'USD', ${status})`;

    // Alice spent a coupon on two lines (named in another order than their SKUs'), was paid, refunded in
    // parts; a late payment of the same order waits for its refund.
    const earned = await order("alice", 1, "SHIPPED", [["SKU-A", 1]]);
    await sql`INSERT INTO benefit_grant (user_id, order_id, benefit_type, amount, code)
              VALUES ('alice', ${earned}, 'COUPON', 500, 'THANKS-1')`;
    const spent = await order("alice", 2, "SHIPPED", [
      ["SKU-B", 1],
      ["SKU-A", 2],
    ]);
    await sql`INSERT INTO coupon_redemption (code, user_id, order_id, discount_cents) VALUES ('THANKS-1', 'alice', ${spent}, 500)`;
    const paid = await payment("alice", spent, 2, "SUCCESS");
    await refund("alice", spent, paid, "R-1", 500, "REFUND_SUCCESS");
    await refund("alice", spent, paid, "R-2", 300, "REFUND_PROCESSING");
    await refund("alice", spent, paid, "R-3", 200, "REFUND_CREATED");
    await refund("alice", spent, paid, "R-4", 1500, "REFUND_FAILED");
    await refund("alice", spent, paid, "R-5", 1900, "REFUND_SUPERSEDED");
    const late = await payment("alice", spent, 3, "PAID_LATE");
    await refund("alice", spent, late, "sys/late/T-3", 2000, "REFUND_CREATED");
    // Bob's order was never paid: nothing moved.
    const unpaid = await order("bob", 4, "CLOSED", [["SKU-B", 3]]);
    await payment("bob", unpaid, 4, "CLOSED");

    await database.migrateToLatest();

    const fingerprints = Object.fromEntries(
      (
        await sql<{ id: string; request_fingerprint: string }[]>`SELECT id, request_fingerprint FROM orders`
      ).map((row) => [row.id, row.request_fingerprint]),
    );
    expect(fingerprints).toEqual({
      [earned]: fingerprint("order.create", { items: [{ skuId: "SKU-A", quantity: 1 }] }),
      [spent]: fingerprint("order.create", {
        items: [
          { skuId: "SKU-A", quantity: 2 },
          { skuId: "SKU-B", quantity: 1 },
        ],
        couponCode: "THANKS-1",
      }),
      [unpaid]: fingerprint("order.create", { items: [{ skuId: "SKU-B", quantity: 3 }] }),
    });

    const balances = await sql<{ out_trade_no: string; shopper: string; revenue: string; owed: string }[]>`
      SELECT p.out_trade_no,
             coalesce(sum(CASE WHEN t.to_account = 'shopper' THEN t.amount_cents WHEN t.from_account = 'shopper' THEN -t.amount_cents END), 0) AS shopper,
             coalesce(sum(CASE WHEN t.to_account = 'revenue' THEN t.amount_cents WHEN t.from_account = 'revenue' THEN -t.amount_cents END), 0) AS revenue,
             coalesce(sum(CASE WHEN t.to_account = 'refunds_payable' THEN t.amount_cents WHEN t.from_account = 'refunds_payable' THEN -t.amount_cents END), 0) AS owed
        FROM payment_order p LEFT JOIN ledger_transfer t ON t.user_id = p.user_id AND t.payment_id = p.id
       GROUP BY p.out_trade_no ORDER BY p.out_trade_no`;
    expect(balances).toEqual([
      // Paid 2000; 500 back; 300 and 200 on their way; failed and superseded refunds hold nothing.
      { out_trade_no: "P-2", shopper: "-1500", revenue: "1000", owed: "500" },
      { out_trade_no: "P-3", shopper: "-2000", revenue: "0", owed: "2000" },
      { out_trade_no: "P-4", shopper: "0", revenue: "0", owed: "0" },
    ]);
  });
});
