"use client";
import { useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useRef, useState } from "react";
import {
  type CartLines,
  cartSignature,
  clearIntent,
  intentForCart,
  loadIntent,
  saveIntent,
} from "~/client/checkout-intent";
import { useTRPC } from "~/client/trpc";
import { useGuardedMutation } from "./use-guarded-mutation";

export interface PlacedOrder {
  orderId: string;
  replayed: boolean;
}

/**
 * Places the cart as an order with a key that belongs to this checkout intent:
 * the same key for double clicks, automatic retries, "Try again" and a reload
 * mid-flight (which resumes the request by itself); a new key for a new cart.
 */
export function usePlaceOrder(options: {
  cart: CartLines;
  /** A coupon to spend: another coupon (or none) is another intent, with its own key. */
  couponCode?: string | null;
  cartReady: boolean;
  onPlaced: (order: PlacedOrder) => void;
}) {
  const { cart, couponCode, cartReady, onPlaced } = options;
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [requestId, setRequestId] = useState<string | null>(null);
  const lines = cartSignature(cart);
  const signature = lines && couponCode ? `${lines}+${couponCode}` : lines;

  const mutation = useGuardedMutation(trpc.orders.create.mutationOptions());
  const { submit } = mutation;

  const place = useCallback(() => {
    if (signature === "") return;
    submit(
      () => {
        const intent = intentForCart(sessionStorage, signature, () => crypto.randomUUID());
        saveIntent(sessionStorage, { ...intent, inFlight: true });
        setRequestId(intent.requestId);
        const items = Object.entries(cart).map(([skuId, quantity]) => ({ skuId, quantity }));
        return { requestId: intent.requestId, items, ...(couponCode ? { couponCode } : {}) };
      },
      {
        onSuccess: (order) => {
          clearIntent(sessionStorage);
          void queryClient.invalidateQueries(trpc.orders.pathFilter());
          void queryClient.invalidateQueries(trpc.coupons.pathFilter());
          onPlaced(order);
        },
        onError: () => {
          const current = loadIntent(sessionStorage);
          if (current) saveIntent(sessionStorage, { ...current, inFlight: false });
        },
      },
    );
  }, [cart, couponCode, signature, submit, onPlaced, queryClient, trpc]);

  // A reload while a request was in flight: ask again with the same key to learn its outcome.
  const resumed = useRef(false);
  useEffect(() => {
    if (!cartReady || resumed.current) return;
    resumed.current = true;
    const stored = loadIntent(sessionStorage);
    if (stored?.inFlight && stored.cartSignature === signature && signature !== "") place();
  }, [cartReady, signature, place]);

  return {
    place,
    requestId,
    isPending: mutation.isPending,
    error: mutation.error,
    failureCount: mutation.failureCount,
    reset: mutation.reset,
  };
}
