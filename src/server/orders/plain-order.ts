import { inArray } from "drizzle-orm";
import type { Db } from "~/server/db/client";
import { orderItem, orders, sku } from "~/server/db/schema";
import { DomainError } from "~/server/errors";
import type { OrderLine } from "./schema";

/**
 * The benchmark's baseline ONLY: the same order insert as createOrder with no
 * idempotency protection at all. Served by a route that exists only when
 * BENCH_ROUTES=true (src/server/trpc/routers/bench.ts); never use it for anything else.
 */
export async function insertOrderUnprotected(db: Db, userId: string, requestId: string, lines: OrderLine[]) {
  return db.transaction(async (tx) => {
    const products = await tx
      .select({ id: sku.id, name: sku.name, priceCents: sku.priceCents, currency: sku.currency })
      .from(sku)
      .where(
        inArray(
          sku.id,
          lines.map((l) => l.skuId),
        ),
      );
    const byId = new Map(products.map((p) => [p.id, p]));
    const priced = lines.map((line) => {
      const product = byId.get(line.skuId);
      if (!product) throw new DomainError("SKU_NOT_FOUND", `unknown SKU ${line.skuId}`);
      return { ...line, product, total: product.priceCents * line.quantity };
    });
    const amountCents = priced.reduce((sum, l) => sum + l.total, 0);
    const [order] = await tx
      .insert(orders)
      .values({ userId, requestId, amountCents, currency: priced[0]?.product.currency ?? "USD" })
      .returning({ orderId: orders.id });
    if (!order) throw new Error("insert returned nothing");
    await tx.insert(orderItem).values(
      priced.map((l) => ({
        orderId: order.orderId,
        skuId: l.skuId,
        skuName: l.product.name,
        quantity: l.quantity,
        unitPriceCents: l.product.priceCents,
        lineTotalCents: l.total,
      })),
    );
    return { orderId: order.orderId, amountCents };
  });
}
