"use client";
import { useCallback } from "react";
import { useTRPC } from "~/client/trpc";
import { useGuardedMutation } from "./use-guarded-mutation";

/**
 * "Pay": asks for the order's one payment (the server returns the same payment
 * however often it is asked) and goes to the provider's page.
 */
export function usePayOrder(orderId: string) {
  const trpc = useTRPC();
  const mutation = useGuardedMutation(trpc.payments.create.mutationOptions(), { holdAfterSuccess: true });
  const { submit } = mutation;
  const pay = useCallback(() => {
    submit({ orderId }, { onSuccess: (payment) => window.location.assign(payment.payUrl) });
  }, [submit, orderId]);
  return { pay, isPending: mutation.isPending || mutation.isSuccess, error: mutation.error };
}
