import { randomUUID } from "node:crypto";
import path from "node:path";
import { vi } from "vitest";
import type { AppContext } from "~/server/app-context";
import { createOrderOperation } from "~/server/orders/create-order";
import { postToken } from "~/server/rest/handlers";
import { restRoute } from "~/server/rest/rest-route";
import { signSession } from "~/server/session/session";
import { plainTrpc } from "~/server/trpc/handler";
import { createCaller } from "~/server/trpc/root";
import { fromWebRequest, toWebResponse } from "~/shared/plain-http";
import { describe, expect, test } from "./support/fixtures";

/**
 * The way an order takes from its transport to `insertOrder`, read off the call itself: the async stack at
 * the order's insert, as files. Each file is entered once on it (a callback handed down, such as an execute,
 * would show its file a second time), the transport calls into the operation layer once, and a lone order
 * claims its key alone (no batcher).
 */
const stacks: string[] = [];
vi.mock("~/server/db/client", async (original) => {
  const real = await original<typeof import("~/server/db/client")>();
  return {
    ...real,
    clientOf: (tx: Parameters<typeof real.clientOf>[0]) => {
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 200;
      const stack = new Error("the order's insert").stack ?? "";
      Error.stackTraceLimit = limit;
      if (/\binsertOrder\b/.test(stack)) stacks.push(stack);
      return real.clientOf(tx);
    },
  };
});

/** The files of the project a stack passes through, from the outermost call in, each stay once. */
function filesOf(stack: string): string[] {
  const root = `${path.resolve(".")}/`;
  const files: string[] = [];
  for (const line of stack.split("\n")) {
    const match = /\(?((?:file:\/\/)?\/[^():]+):\d+:\d+\)?$/.exec(line.trim());
    const file = match?.[1]?.replace(/^file:\/\//, "");
    if (!file?.startsWith(root) || file.includes("/node_modules/")) continue;
    const relative = file.slice(root.length);
    if (relative.startsWith("test/")) continue;
    if (files[files.length - 1] !== relative) files.push(relative);
  }
  return files.reverse();
}

/** The way of the one order placed by `place`. */
async function wayOf(place: () => Promise<unknown>): Promise<string[]> {
  stacks.length = 0;
  await place();
  expect(stacks).toHaveLength(1);
  return filesOf(stacks[0] ?? "");
}

/** From the operation layer's entry to the insert: the same whichever transport called. */
const CORE_WAY = [
  "src/server/operations/run-operation.ts",
  "src/server/operations/record-store.ts",
  "packages/idempotency/src/run.ts",
  "packages/idempotency/src/look-up.ts",
  "packages/idempotency/src/claim.ts",
  "packages/idempotency/src/claim-in-transaction.ts",
  "packages/idempotency/src/trace.ts",
  "src/server/operations/record-operation.ts",
  "src/server/orders/create-order.ts",
];

const body = { items: [{ skuId: "SKU-MUG", quantity: 1 }] };

describe("an order's way to its insert", () => {
  test("REST, as the production host calls a route: the answer's protocol, the route, one call into the operation layer, the core, the order; no file twice", async ({
    app,
  }) => {
    const deps = { app, tokensEnabled: true, logError: () => {} };
    const tokenAnswer = toWebResponse(
      await postToken(
        deps,
        fromWebRequest(new Request("http://127.0.0.1/api/v1/tokens", { method: "POST" })),
      ),
    );
    const { token } = (await tokenAnswer.json()) as { token: string };
    // The route file's export, called with the app the host would give it (src/host/route-table.ts calls `plain`).
    const globals = globalThis as unknown as { checkoutApp?: AppContext };
    const previous = globals.checkoutApp;
    globals.checkoutApp = app;
    try {
      const way = await wayOf(async () => {
        const request = new Request("http://127.0.0.1/api/v1/orders", {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            "idempotency-key": randomUUID(),
          },
          body: JSON.stringify(body),
        });
        const answer = await restRoute(createOrderOperation).plain(fromWebRequest(request), {});
        expect(answer.status).toBe(201);
      });
      expect(way).toEqual(["src/server/rest/protocol.ts", "src/server/rest/rest-route.ts", ...CORE_WAY]);
    } finally {
      globals.checkoutApp = previous;
    }
  });

  test("tRPC as the production host serves a shop page's write: the same way", async ({ app }) => {
    const cookie = `checkout_session=${signSession(randomUUID(), app.sessionSecret)}`;
    const text = JSON.stringify({ json: { requestId: randomUUID(), ...body } });
    const way = await wayOf(async () => {
      const answer = await plainTrpc(app, {
        method: "POST",
        url: "/api/trpc/orders.create",
        headers: new Headers({ "content-type": "application/json", cookie }),
        text: async () => text,
        toWeb: async () => new Request("http://127.0.0.1/"),
      });
      expect(answer.status).toBe(200);
    });
    expect(way).toEqual(["src/server/trpc/handler.ts", ...CORE_WAY]);
  });

  test("tRPC's procedure (the fetch adapter, a server caller): the same way", async ({ app }) => {
    const caller = createCaller({ app, userId: `path-${randomUUID()}`, requestId: randomUUID() });
    const way = await wayOf(() => caller.orders.create({ requestId: randomUUID(), ...body }));
    expect(way.slice(-CORE_WAY.length)).toEqual(CORE_WAY);
  });
});
