import { describe, expect, it } from "vitest";
import {
  cartSignature,
  clearIntent,
  intentForCart,
  type KeyValueStorage,
  loadIntent,
  saveIntent,
} from "./checkout-intent";

function memoryStorage(): KeyValueStorage {
  const values = new Map<string, string>();
  return {
    getItem: (key) => values.get(key) ?? null,
    setItem: (key, value) => void values.set(key, value),
    removeItem: (key) => void values.delete(key),
  };
}

let counter = 0;
const newKey = () => `key-${++counter}-xxxxxxxx`;

describe("checkout intent", () => {
  it("keeps one key per cart across calls (retries, reloads)", () => {
    const storage = memoryStorage();
    const first = intentForCart(storage, cartSignature({ A: 1, B: 2 }), newKey);
    const again = intentForCart(storage, cartSignature({ B: 2, A: 1 }), newKey);
    expect(again.requestId).toBe(first.requestId);
  });

  it("starts a new key when the cart changes or after the intent is cleared", () => {
    const storage = memoryStorage();
    const first = intentForCart(storage, cartSignature({ A: 1 }), newKey);
    const changed = intentForCart(storage, cartSignature({ A: 2 }), newKey);
    expect(changed.requestId).not.toBe(first.requestId);
    clearIntent(storage);
    const afterSuccess = intentForCart(storage, cartSignature({ A: 2 }), newKey);
    expect(afterSuccess.requestId).not.toBe(changed.requestId);
  });

  it("remembers that a request is in flight", () => {
    const storage = memoryStorage();
    const intent = intentForCart(storage, "A x1", newKey);
    saveIntent(storage, { ...intent, inFlight: true });
    expect(loadIntent(storage)).toEqual({ ...intent, inFlight: true });
  });

  it("ignores zero quantities and survives garbage in storage", () => {
    expect(cartSignature({ A: 1, B: 0 })).toBe(cartSignature({ A: 1 }));
    const storage = memoryStorage();
    storage.setItem("checkout.intent", "{not json");
    expect(loadIntent(storage)).toBeNull();
  });
});
