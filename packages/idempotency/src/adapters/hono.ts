import { answerIdempotently, IDEMPOTENCY_KEY_FIELD, type IdempotentRoute } from "../http-binding";
import type { IdempotencyConfig, RecordStore } from "../types";

/** What the adapter uses of Hono's context. */
interface HonoContextLike {
  req: { header(name: string): string | undefined };
  body(data: string, status: number, headers: Record<string, string>): Response;
}

/**
 * A Hono handler that runs `route`'s operation once per Idempotency-Key:
 * `app.post("/transfers", idempotentHono(store, config, route))`. `route.operation` gets the context, and reads
 * the body itself (`await c.req.json()`). An error that is not a refusal is thrown, for Hono's `onError`.
 */
export function idempotentHono<T, Tx, C extends HonoContextLike>(
  store: RecordStore<Tx>,
  config: IdempotencyConfig | undefined,
  route: IdempotentRoute<T, Tx, C>,
): (c: C) => Promise<Response> {
  return async (c) => {
    const call = { keyField: c.req.header(IDEMPOTENCY_KEY_FIELD), scope: route.scope(c) };
    const answer = await answerIdempotently(store, config, route, c, call);
    return c.body(answer.body, answer.status, answer.headers);
  };
}
