/**
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

export function loadIntent(storage: KeyValueStorage): CheckoutIntent | null {
  try {
    const raw = storage.getItem(INTENT_STORAGE_KEY);
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

export function saveIntent(storage: KeyValueStorage, intent: CheckoutIntent): void {
  storage.setItem(INTENT_STORAGE_KEY, JSON.stringify(intent));
}

export function clearIntent(storage: KeyValueStorage): void {
  storage.removeItem(INTENT_STORAGE_KEY);
}

/** The intent for this cart: the stored one if the cart is unchanged, else a new key. */
export function intentForCart(
  storage: KeyValueStorage,
  signature: string,
  newKey: () => string,
): CheckoutIntent {
  const stored = loadIntent(storage);
  if (stored && stored.cartSignature === signature) return stored;
  const fresh = { requestId: newKey(), cartSignature: signature, inFlight: false };
  saveIntent(storage, fresh);
  return fresh;
}
