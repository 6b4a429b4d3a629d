"use client";
import { type MutateOptions, type UseMutationOptions, useMutation } from "@tanstack/react-query";
import { useCallback, useRef } from "react";
import { isRetryable, MAX_AUTOMATIC_RETRIES, retryDelayMs } from "~/client/retry";

/**
 * A shop button's mutation: retried automatically with the same input (hence the same key) when the answer
 * is worth waiting for, and guarded against a second click while the first is in flight (`isPending` lags
 * a fast second click by a tick; the ref does not). `submit` returns false when a click was absorbed; given
 * a function for its input, it calls it only for the click that counts.
 * `holdAfterSuccess`: the button stays spent after a success (the page is about to go elsewhere).
 */
export function useGuardedMutation<TData, TError, TVariables>(
  options: UseMutationOptions<TData, TError, TVariables>,
  { holdAfterSuccess = false }: { holdAfterSuccess?: boolean } = {},
) {
  const submitting = useRef(false);
  const mutation = useMutation({
    ...options,
    retry: (failures, error) => failures < MAX_AUTOMATIC_RETRIES && isRetryable(error),
    retryDelay: retryDelayMs,
  });
  const { mutate } = mutation;
  const submit = useCallback(
    (
      variables: TVariables | (() => TVariables),
      callbacks: MutateOptions<TData, TError, TVariables> = {},
    ): boolean => {
      if (submitting.current) return false;
      submitting.current = true;
      // A function is asked only once the click is the one that counts (it may save the intent's key).
      const input = typeof variables === "function" ? (variables as () => TVariables)() : variables;
      mutate(input, {
        ...callbacks,
        onSettled: (...args) => {
          if (!holdAfterSuccess || args[1] !== null) submitting.current = false;
          callbacks.onSettled?.(...args);
        },
      });
      return true;
    },
    [mutate, holdAfterSuccess],
  );
  return { ...mutation, submit };
}
