import { answerIdempotently, IDEMPOTENCY_KEY_FIELD, type IdempotentRoute } from "../http-binding";
import type { IdempotencyConfig, RecordStore } from "../types";

/** What the adapter uses of Fastify's request and reply. */
interface FastifyRequestLike {
  headers: Record<string, string | string[] | undefined>;
}
interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  send(payload: string): unknown;
}

/**
 * A Fastify route handler that runs `route`'s operation once per Idempotency-Key:
 * `app.post("/transfers", idempotentFastify(store, config, route))`. An error that is not a refusal is thrown,
 * for Fastify's error handler.
 */
export function idempotentFastify<T, Tx, Req extends FastifyRequestLike>(
  store: RecordStore<Tx>,
  config: IdempotencyConfig | undefined,
  route: IdempotentRoute<T, Tx, Req>,
): (request: Req, reply: FastifyReplyLike) => Promise<unknown> {
  return async (request, reply) => {
    const call = { keyField: request.headers[IDEMPOTENCY_KEY_FIELD], scope: route.scope(request) };
    const answer = await answerIdempotently(store, config, route, request, call);
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  };
}
