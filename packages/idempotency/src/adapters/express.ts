import {
  answerIdempotently,
  type HttpAnswer,
  IDEMPOTENCY_KEY_FIELD,
  type IdempotentRoute,
} from "../http-binding";
import type { IdempotencyConfig, RecordStore } from "../types";

/** What the adapter uses of Express's request and response (Express 4 and 5 have them). */
interface ExpressRequest {
  headers: Record<string, string | string[] | undefined>;
}
interface ExpressResponse {
  status(code: number): ExpressResponse;
  set(fields: Record<string, string>): ExpressResponse;
  send(body: string): unknown;
}

/**
 * An Express handler that runs `route`'s operation once per Idempotency-Key:
 * `app.post("/transfers", express.json(), idempotentExpress(store, config, route))`. An error that is not a
 * refusal goes to `next`.
 */
export function idempotentExpress<T, Tx, Req extends ExpressRequest>(
  store: RecordStore<Tx>,
  config: IdempotencyConfig | undefined,
  route: IdempotentRoute<T, Tx, Req>,
): (req: Req, res: ExpressResponse, next: (error?: unknown) => void) => Promise<void> {
  return async (req, res, next) => {
    let answer: HttpAnswer;
    try {
      const call = { keyField: req.headers[IDEMPOTENCY_KEY_FIELD], scope: route.scope(req) };
      answer = await answerIdempotently(store, config, route, req, call);
    } catch (error) {
      next(error);
      return;
    }
    res.status(answer.status).set(answer.headers).send(answer.body);
  };
}
