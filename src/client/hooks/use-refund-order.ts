"use client";
import { useQueryClient } from "@tanstack/react-query";
import { useCallback } from "react";
import { clearIntent, intentForCart } from "~/client/checkout-intent";
import { isRetryable } from "~/client/retry";
import { useTRPC } from "~/client/trpc";
import { useGuardedMutation } from "./use-guarded-mutation";

/**
 * "Refund": one refund_no per refund intent (this order, this amount), kept in
 * sessionStorage, reused by double clicks and retries; a new amount, a
 * finished refund or a refusal starts a new one.
 */
export function useRefundOrder(orderId: string) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const storageKey = `refund.intent.${orderId}`;
  const mutation = useGuardedMutation(trpc.refunds.create.mutationOptions());
  const { submit } = mutation;
  const refund = useCallback(
    (what: number | { lines: { skuId: string; quantity: number }[] }) => {
      submit(
        () => {
          // An amount, or lines given back: each intent its own refund number.
          const request = typeof what === "number" ? { amountCents: what } : { lines: what.lines };
          const intent = intentForCart(
            sessionStorage,
            typeof what === "number"
              ? String(what)
              : `lines:${what.lines.map((l) => `${l.skuId}x${l.quantity}`).join(",")}`,
            () => `R-${crypto.randomUUID()}`,
            storageKey,
          );
          return { orderId, refundNo: intent.requestId, ...request };
        },
        {
          onSuccess: () => clearIntent(sessionStorage, storageKey),
          // A business answer (too much, not refundable) is stored for this refund_no: a new try needs a new one.
          onError: (error) => {
            if (!isRetryable(error)) clearIntent(sessionStorage, storageKey);
          },
          onSettled: () => {
            void queryClient.invalidateQueries(trpc.refunds.pathFilter());
            void queryClient.invalidateQueries(trpc.orders.pathFilter());
          },
        },
      );
    },
    [submit, orderId, queryClient, storageKey, trpc],
  );
  return { refund, isPending: mutation.isPending, error: mutation.error };
}
