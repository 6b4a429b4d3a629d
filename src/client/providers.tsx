"use client";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { createTRPCClient, httpBatchLink, httpLink, splitLink } from "@trpc/client";
import { type ReactNode, useState } from "react";
import superjson from "superjson";
import { TRPC_MAX_BATCH_SIZE } from "~/server/trpc/limits";
import type { AppRouter } from "~/server/trpc/root";
import { TRPCProvider } from "./trpc";

const url = "/api/trpc";

export function Providers({ children }: { children: ReactNode }) {
  const [queryClient] = useState(
    () => new QueryClient({ defaultOptions: { queries: { staleTime: 5_000, retry: 2 } } }),
  );
  const [trpcClient] = useState(() =>
    createTRPCClient<AppRouter>({
      links: [
        // Mutations travel alone, so each keyed request is one HTTP request that can be retried as such.
        splitLink({
          condition: (op) => op.type === "mutation",
          true: httpLink({ url, transformer: superjson }),
          false: httpBatchLink({ url, transformer: superjson, maxItems: TRPC_MAX_BATCH_SIZE }),
        }),
      ],
    }),
  );
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
