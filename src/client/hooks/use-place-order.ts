"use client";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useRef, useState } from "react";
import {
  type CartLines,
  cartSignature,
  clearIntent,
  intentForCart,
  loadIntent,
  saveIntent,
} from "~/client/checkout-intent";
import { isRetryable, MAX_AUTOMATIC_RETRIES, retryDelayMs } from "~/client/retry";
import { useTRPC } from "~/client/trpc";

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
  // isPending lags a fast second click by a tick; the ref does not.
  const submitting = useRef(false);
  const [requestId, setRequestId] = useState<string | null>(null);
  const lines = cartSignature(cart);
  const signature = lines && couponCode ? `${lines}+${couponCode}` : lines;

  const mutation = useMutation(
    trpc.checkout.createOrder.mutationOptions({
      retry: (failures, error) => failures < MAX_AUTOMATIC_RETRIES && isRetryable(error),
      retryDelay: retryDelayMs,
    }),
  );
  const { mutate } = mutation;

  const place = useCallback(() => {
    if (submitting.current || signature === "") return;
    submitting.current = true;
    const intent = intentForCart(sessionStorage, signature, () => crypto.randomUUID());
    saveIntent(sessionStorage, { ...intent, inFlight: true });
    setRequestId(intent.requestId);
    const items = Object.entries(cart).map(([skuId, quantity]) => ({ skuId, quantity }));
    mutate(
      { requestId: intent.requestId, items, ...(couponCode ? { couponCode } : {}) },
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
        onSettled: () => {
          submitting.current = false;
        },
      },
    );
  }, [cart, couponCode, signature, mutate, onPlaced, queryClient, trpc]);

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
