import type { Db } from "./client";
import { sku } from "./schema";

export const CATALOGUE = [
  {
    id: "SKU-ESPRESSO",
    name: "Espresso beans, 1 kg",
    description: "Dark roast, whole beans.",
    priceCents: 2490,
    stock: 500,
  },
  {
    id: "SKU-GRINDER",
    name: "Hand grinder",
    description: "Conical steel burrs, 40 g hopper.",
    priceCents: 8900,
    stock: 120,
  },
  {
    id: "SKU-MUG",
    name: "Enamel mug",
    description: "350 ml, dishwasher safe.",
    priceCents: 1250,
    stock: 1000,
  },
  {
    id: "SKU-KETTLE",
    name: "Gooseneck kettle",
    description: "0.9 l, for pour-over.",
    priceCents: 5400,
    stock: 60,
  },
  {
    id: "SKU-LIMITED",
    name: "Limited edition dripper",
    description: "Only three were ever made.",
    priceCents: 15000,
    stock: 3,
  },
] as const;

/** Inserts the catalogue; rows that already exist are left as they are (stock included). */
export async function seedCatalogue(db: Db): Promise<number> {
  const inserted = await db
    .insert(sku)
    .values(CATALOGUE.map((item) => ({ ...item, initialStock: item.stock, currency: "USD" })))
    .onConflictDoNothing({ target: sku.id })
    .returning({ id: sku.id });
  return inserted.length;
}
