import { asc } from "drizzle-orm";
import type { Executor } from "~/server/db/client";
import { sku } from "~/server/db/schema";

export interface CatalogItem {
  id: string;
  name: string;
  description: string;
  priceCents: number;
  currency: string;
  stock: number;
}

export function listCatalog(db: Executor): Promise<CatalogItem[]> {
  return db
    .select({
      id: sku.id,
      name: sku.name,
      description: sku.description,
      priceCents: sku.priceCents,
      currency: sku.currency,
      stock: sku.stock,
    })
    .from(sku)
    .orderBy(asc(sku.priceCents));
}
