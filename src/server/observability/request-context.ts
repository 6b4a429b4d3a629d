import { AsyncLocalStorage } from "node:async_hooks";

/** The request being served, so log lines deep in a service can name it without passing it around. */
interface RequestContext {
  requestId: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

export function withRequestContext<T>(context: RequestContext, work: () => Promise<T>): Promise<T> {
  return storage.run(context, work);
}

export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}
