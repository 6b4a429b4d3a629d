"use client";
import { useMutation } from "@tanstack/react-query";
import { useCallback, useRef } from "react";
import { isRetryable, MAX_AUTOMATIC_RETRIES, retryDelayMs } from "~/client/retry";
import { useTRPC } from "~/client/trpc";

/**
 * "Pay": asks for the order's one payment (the server returns the same payment
 * however often it is asked) and goes to the provider's page.
 */
export function usePayOrder(orderId: string) {
  const trpc = useTRPC();
  const submitting = useRef(false);
  const mutation = useMutation(
    trpc.payments.create.mutationOptions({
      retry: (failures, error) => failures < MAX_AUTOMATIC_RETRIES && isRetryable(error),
      retryDelay: retryDelayMs,
    }),
  );
  const { mutate } = mutation;
  const pay = useCallback(() => {
    if (submitting.current) return;
    submitting.current = true;
    mutate(
      { orderId },
      {
        onSuccess: (payment) => window.location.assign(payment.payUrl),
        onError: () => {
          submitting.current = false;
        },
      },
    );
  }, [mutate, orderId]);
  return { pay, isPending: mutation.isPending || mutation.isSuccess, error: mutation.error };
}
