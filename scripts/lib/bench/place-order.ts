import { createHash } from "node:crypto";
import type postgres from "postgres";

export interface Line {
  skuId: string;
  quantity: number;
}

/**
 * The order every bench server places the same way (the floor, the peers, the adapters): price the lines from
 * `sku`, insert the order and its lines, for one shopper, in the transaction `tx` is.
 */
export async function placeOrderIn(
  tx: postgres.TransactionSql | postgres.ReservedSql,
  USER_ID: string,
  requestId: string,
  items: Line[],
) {
  const products = await tx<{ id: string; name: string; price_cents: number; currency: string }[]>`
    SELECT id, name, price_cents, currency FROM sku WHERE id IN ${tx(items.map((i) => i.skuId))}`;
  const byId = new Map(products.map((p) => [p.id, p]));
  const lines = items.map((item) => {
    const product = byId.get(item.skuId);
    if (!product) throw new Error(`unknown SKU ${item.skuId}`);
    return { ...item, product, total: product.price_cents * item.quantity };
  });
  const amount = lines.reduce((sum, line) => sum + line.total, 0);
  const [order] = await tx<{ orderId: string; status: string; amountCents: string; currency: string }[]>`
    INSERT INTO orders (user_id, request_id, request_fingerprint, amount_cents, currency)
    VALUES (${USER_ID}, ${requestId}, ${createHash("sha256").update(JSON.stringify(items)).digest("hex")},
            ${amount}, ${lines[0]?.product.currency ?? "USD"})
    RETURNING id AS "orderId", status, amount_cents AS "amountCents", currency`;
  if (!order) throw new Error("no order");
  await tx`INSERT INTO order_item ${tx(
    lines.map((line) => ({
      user_id: USER_ID,
      order_id: order.orderId,
      sku_id: line.skuId,
      sku_name: line.product.name,
      quantity: line.quantity,
      unit_price_cents: line.product.price_cents,
      line_total_cents: line.total,
    })),
  )}`;
  return { ...order, amountCents: Number(order.amountCents) };
}

/** The order in a transaction of its own, through postgres.js. */
export function orderPlacer(sql: postgres.Sql, USER_ID: string) {
  return (requestId: string, items: Line[]) => sql.begin((tx) => placeOrderIn(tx, USER_ID, requestId, items));
}
