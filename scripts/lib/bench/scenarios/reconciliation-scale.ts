import { createDb } from "~/server/db/client";
import { reconcileWhenDue } from "~/server/reconciliation/reconcile";
import type { Bench } from "../bench";
import { sideDatabase } from "../peer-database";
import { log, tiny } from "../settings";

/** Orders in the shop, and how many of them moved since the last reconciliation. */
const ORDERS = tiny ? 20_000 : 1_000_000;
const TOUCHED = tiny ? 100 : 1_000;
/** An incremental run must take less than this (issue 41). */
const INCREMENTAL_MUST_MS = 1_000;
const SHOPPERS = tiny ? 200 : 10_000;

/**
 * 14: reconciliation as the shop grows. A database of its own with ORDERS shipped orders, each with its line,
 * payment, deduction, shipment, points, ledger transfer and consumed events (loaded in bulk by SQL, the touch
 * triggers off, as rows from long ago). A full run is kept, and an incremental one of a hundred orders (the
 * worker's connections warm, as in a shop that runs); then TOUCHED orders move (one of them broken by hand), and
 * the worker's next run is incremental: it must take under INCREMENTAL_MUST_MS and find the break.
 */
export async function reconciliationScale(bench: Bench) {
  log(
    `14. reconciliation with ${ORDERS.toLocaleString("en")} orders: a full run, then an incremental one after ${TOUCHED.toLocaleString("en")} moved`,
  );
  const side = await sideDatabase(bench.url, "reconcile_scale");
  bench.cleanups.unshift(() => side.drop());
  const loadedS = await fill(side.sql);
  const db = createDb(side.url, { max: 4 });
  bench.cleanups.unshift(() => db.$client.end({ timeout: 2 }));
  const periods = { everyMin: 1_000_000, fullEveryMin: 1_000_000 };
  const options = { lagSeconds: 0 };
  const full = await reconcileWhenDue(db, periods, options);
  // The worker's pool is warm in a shop that runs: one incremental run (of a few orders) before the one measured.
  const nextSlot = () =>
    side.sql`UPDATE reconciliation_report SET slot = slot - 1 WHERE kind = 'incremental'`;
  await side.sql`
    WITH moved AS (SELECT user_id, id FROM orders ORDER BY random() LIMIT 100)
    UPDATE benefit_grant g SET amount = g.amount FROM moved WHERE g.user_id = moved.user_id AND g.order_id = moved.id`;
  await reconcileWhenDue(db, periods, options);
  await nextSlot();
  await side.sql`UPDATE order_touch SET at = at - interval '1 hour'`;

  // TOUCHED orders move (their points are taken back and given again); one keeps a point too many.
  await side.sql`
    WITH moved AS (SELECT user_id, id FROM orders ORDER BY random() LIMIT ${TOUCHED})
    UPDATE benefit_grant g SET amount = g.amount FROM moved WHERE g.user_id = moved.user_id AND g.order_id = moved.id`;
  const [broken] = await side.sql<{ order_id: string }[]>`
    UPDATE benefit_grant SET amount = amount + 1
     WHERE (user_id, order_id) = (SELECT user_id, order_id FROM order_touch ORDER BY at DESC LIMIT 1)
    RETURNING order_id`;
  const incremental = await reconcileWhenDue(db, periods, options);
  const found = (incremental?.invariants ?? []).some((i) =>
    i.violations.some((v) => v.rows.some((row) => row.order_id === broken?.order_id)),
  );
  const incrementalMs = incremental?.tookMs ?? Number.POSITIVE_INFINITY;
  const ok =
    full?.kind === "full" &&
    incremental?.kind === "incremental" &&
    incremental.ordersChecked !== undefined &&
    incremental.ordersChecked >= TOUCHED &&
    incrementalMs < INCREMENTAL_MUST_MS &&
    found;
  bench.rows.push({
    id: "reconcile-incremental",
    scenario: `14 incremental reconciliation, ${TOUCHED.toLocaleString("en")} of ${ORDERS.toLocaleString("en")} orders touched`,
    requestsPerSec: 0,
    p50Ms: incrementalMs,
    p99Ms: incrementalMs,
    peakRssMb: 0,
    correctness: `loaded in ${loadedS.toFixed(1)} s; full run ${full?.tookMs ?? "?"} ms; incremental run ${incrementalMs} ms over ${incremental?.ordersChecked ?? "?"} orders (must be under ${INCREMENTAL_MUST_MS} ms); found the break planted in a touched order: ${found}`,
    ok,
  });
}

/**
 * Shipped orders as the app leaves them, over SHOPPERS shoppers, written with the touch triggers off (as if
 * long ago: nothing is touched). Vacuumed and analysed, as a shop's tables that have run a while.
 */
export async function fill(sql: Awaited<ReturnType<typeof sideDatabase>>["sql"]): Promise<number> {
  const started = Date.now();
  await sql.begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    await tx.unsafe(`
      CREATE TEMP TABLE bulk ON COMMIT DROP AS
      SELECT 'bulk-' || (i % ${SHOPPERS}) AS user_id, gen_random_uuid() AS order_id, gen_random_uuid() AS payment_id,
             gen_random_uuid() AS paid_event, gen_random_uuid() AS deducted_event, i,
             now() - interval '3 days' + i * interval '1 millisecond' AS at
        FROM generate_series(1, ${ORDERS}) AS i`);
    await tx.unsafe(`
      INSERT INTO orders (id, user_id, request_id, request_fingerprint, amount_cents, currency, status, created_at, updated_at)
      SELECT order_id, user_id, 'bulk-' || i, 'bulk', 1250, 'USD', 'SHIPPED', at, at FROM bulk;
      INSERT INTO order_item (user_id, order_id, sku_id, sku_name, quantity, unit_price_cents, line_total_cents)
      SELECT user_id, order_id, 'SKU-MUG', 'Mug', 1, 1250, 1250 FROM bulk;
      INSERT INTO payment_order (id, user_id, order_id, out_trade_no, amount_cents, currency, status, transaction_id, paid_at, created_at, updated_at)
      SELECT payment_id, user_id, order_id, 'bulk-' || i, 1250, 'USD', 'SUCCESS', 'T-bulk-' || i, at, at, at FROM bulk;
      INSERT INTO ledger_transfer (user_id, order_id, payment_id, fact_key, from_account, to_account, amount_cents, currency, created_at)
      SELECT user_id, order_id, payment_id, 'capture:' || payment_id, 'shopper', 'revenue', 1250, 'USD', at FROM bulk;
      INSERT INTO outbox_event (id, user_id, event_type, aggregate_type, aggregate_id, dedupe_key, payload, created_at, published_at)
      SELECT paid_event, user_id, 'OrderPaid', 'order', order_id::text, 'OrderPaid:' || order_id, '{}'::jsonb, at, at FROM bulk
      UNION ALL
      SELECT deducted_event, user_id, 'StockDeducted', 'order', order_id::text, 'StockDeducted:' || order_id, '{}'::jsonb, at, at FROM bulk;
      INSERT INTO message_consume_record (user_id, event_id, consumer_name, status, result, created_at, done_at)
      SELECT user_id, paid_event, c, 'DONE', 'APPLIED', at, at FROM bulk, (VALUES ('stock'), ('benefits')) AS v(c)
      UNION ALL
      SELECT user_id, deducted_event, 'shipping', 'DONE', 'APPLIED', at, at FROM bulk;
      INSERT INTO stock_deduct_record (user_id, order_id, sku_id, quantity, created_at)
      SELECT user_id, order_id, 'SKU-MUG', 1, at FROM bulk;
      INSERT INTO shipment (user_id, order_id, tracking_no, created_at) SELECT user_id, order_id, 'TRK-bulk-' || i, at FROM bulk;
      INSERT INTO shipment_line (user_id, order_id, sku_id, quantity) SELECT user_id, order_id, 'SKU-MUG', 1 FROM bulk;
      INSERT INTO benefit_grant (user_id, order_id, benefit_type, amount, created_at)
      SELECT user_id, order_id, 'LOYALTY_POINTS', 12, at FROM bulk;
      INSERT INTO benefit_grant (user_id, order_id, benefit_type, amount, code, created_at)
      SELECT user_id, order_id, 'COUPON', 500, 'BULK-' || i, at FROM bulk;
      UPDATE sku SET initial_stock = initial_stock + ${ORDERS} WHERE id = 'SKU-MUG';`);
  });
  await sql.unsafe("VACUUM (ANALYZE)");
  await sql.unsafe("CHECKPOINT");
  return (Date.now() - started) / 1000;
}
