/**
 * The same mechanism serves refunds: one refund_no per (order, amount) intent,
 * under its own storage key.
 *
 * A checkout intent is "this shopper wants to buy this cart". Its request id is
 * made once and kept in sessionStorage, so double clicks, retries and reloads
 * all send the same key; a different cart, or a finished order, starts a new one.
 */
export interface CheckoutIntent {
  requestId: string;
  cartSignature: string;
  /** A request was sent and no final answer has been seen yet (survives a reload). */
  inFlight: boolean;
}

export interface KeyValueStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export const INTENT_STORAGE_KEY = "checkout.intent";

export type CartLines = Record<string, number>;

/** Order-independent, zero quantities ignored: the same cart always signs the same. */
export function cartSignature(cart: CartLines): string {
  return Object.entries(cart)
    .filter(([, quantity]) => quantity > 0)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([skuId, quantity]) => `${skuId}x${quantity}`)
    .join(",");
}

export function loadIntent(storage: KeyValueStorage, key = INTENT_STORAGE_KEY): CheckoutIntent | null {
  try {
    const raw = storage.getItem(key);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Partial<CheckoutIntent>;
    if (typeof parsed.requestId !== "string" || typeof parsed.cartSignature !== "string") return null;
    return {
      requestId: parsed.requestId,
      cartSignature: parsed.cartSignature,
      inFlight: parsed.inFlight === true,
    };
  } catch {
    return null;
  }
}

export function saveIntent(storage: KeyValueStorage, intent: CheckoutIntent, key = INTENT_STORAGE_KEY): void {
  storage.setItem(key, JSON.stringify(intent));
}

export function clearIntent(storage: KeyValueStorage, key = INTENT_STORAGE_KEY): void {
  storage.removeItem(key);
}

/** The intent for this cart: the stored one if the cart is unchanged, else a new key. */
export function intentForCart(
  storage: KeyValueStorage,
  signature: string,
  newKey: () => string,
  key = INTENT_STORAGE_KEY,
): CheckoutIntent {
  const stored = loadIntent(storage, key);
  if (stored && stored.cartSignature === signature) return stored;
  const fresh = { requestId: newKey(), cartSignature: signature, inFlight: false };
  saveIntent(storage, fresh, key);
  return fresh;
}
