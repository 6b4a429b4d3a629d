"use client";
import { useQueryClient } from "@tanstack/react-query";
import { useCallback } from "react";
import { useTRPC } from "~/client/trpc";
import { useGuardedMutation } from "./use-guarded-mutation";

/** "Cancel order": the order id is the key (a cancel happens once per order), so double clicks and retries are safe. */
export function useCancelOrder(orderId: string) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const mutation = useGuardedMutation(trpc.orders.cancel.mutationOptions());
  const { submit } = mutation;
  const cancel = useCallback(() => {
    submit(
      { orderId },
      {
        onSettled: () => {
          void queryClient.invalidateQueries(trpc.orders.pathFilter());
          void queryClient.invalidateQueries(trpc.payments.pathFilter());
        },
      },
    );
  }, [submit, orderId, queryClient, trpc]);
  return { cancel, isPending: mutation.isPending, error: mutation.error };
}
