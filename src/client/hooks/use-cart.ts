"use client";
import { useCallback, useEffect, useState } from "react";
import type { CartLines } from "~/client/checkout-intent";

const CART_STORAGE_KEY = "checkout.cart";
const COUPON_STORAGE_KEY = "checkout.coupon";

function readCart(): CartLines {
  try {
    const parsed: unknown = JSON.parse(sessionStorage.getItem(CART_STORAGE_KEY) ?? "{}");
    if (!parsed || typeof parsed !== "object") return {};
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (entry): entry is [string, number] => Number.isInteger(entry[1]) && entry[1] > 0,
      ),
    );
  } catch {
    return {};
  }
}

/** The cart lives in sessionStorage, so a reload (even mid-checkout) keeps it. */
export function useCart() {
  const [cart, setCart] = useState<CartLines>({});
  const [ready, setReady] = useState(false);

  useEffect(() => {
    setCart(readCart());
    setReady(true);
  }, []);

  const update = useCallback((next: (current: CartLines) => CartLines) => {
    setCart((current) => {
      const value = next(current);
      sessionStorage.setItem(CART_STORAGE_KEY, JSON.stringify(value));
      return value;
    });
  }, []);

  const setQuantity = useCallback(
    (skuId: string, quantity: number) =>
      update((current) => {
        const { [skuId]: _removed, ...rest } = current;
        return quantity > 0 ? { ...rest, [skuId]: quantity } : rest;
      }),
    [update],
  );
  // The coupon chosen for this cart: part of the checkout intent, so it survives a reload too.
  const [couponCode, setCoupon] = useState<string | null>(null);
  useEffect(() => setCoupon(sessionStorage.getItem(COUPON_STORAGE_KEY)), []);
  const chooseCoupon = useCallback((code: string | null) => {
    if (code) sessionStorage.setItem(COUPON_STORAGE_KEY, code);
    else sessionStorage.removeItem(COUPON_STORAGE_KEY);
    setCoupon(code);
  }, []);

  const clear = useCallback(() => {
    update(() => ({}));
    chooseCoupon(null);
  }, [update, chooseCoupon]);

  return { cart, ready, setQuantity, clear, couponCode, chooseCoupon };
}
