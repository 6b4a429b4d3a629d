"use client";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useCallback, useRef } from "react";
import { isRetryable, MAX_AUTOMATIC_RETRIES, retryDelayMs } from "~/client/retry";
import { useTRPC } from "~/client/trpc";

/**
 * "Cancel order": the order id is the key (a cancel happens once per order), so
 * double clicks and automatic retries are safe; a ref guards the second click.
 */
export function useCancelOrder(orderId: string) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const submitting = useRef(false);
  const mutation = useMutation(
    trpc.orders.cancel.mutationOptions({
      retry: (failures, error) => failures < MAX_AUTOMATIC_RETRIES && isRetryable(error),
      retryDelay: retryDelayMs,
    }),
  );
  const { mutate } = mutation;
  const cancel = useCallback(() => {
    if (submitting.current) return;
    submitting.current = true;
    mutate(
      { orderId },
      {
        onSettled: () => {
          submitting.current = false;
          void queryClient.invalidateQueries(trpc.orders.pathFilter());
          void queryClient.invalidateQueries(trpc.payments.pathFilter());
        },
      },
    );
  }, [mutate, orderId, queryClient, trpc]);
  return { cancel, isPending: mutation.isPending, error: mutation.error };
}
