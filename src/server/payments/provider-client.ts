import type { z } from "zod";
import { serviceUnavailable } from "~/server/errors";
import {
  type MessageKind,
  type ProviderApi,
  SIGNATURE_HEADER,
  signBody,
  signQuery,
  verifyBodySignature,
} from "~/shared/provider-contract";

/** What the merchant needs to call its payment provider's signed APIs. */
export interface ProviderClientDeps {
  appId: string;
  webhookSecret: string;
  /** Where the provider's API is (MockPay runs in this app by default). */
  providerBaseUrl: string;
  toleranceS: number;
  fetchFn?: typeof fetch;
  timeoutMs?: number;
  now?: () => Date;
}

/**
 * The merchant's one client for the provider's signed APIs: the request is signed,
 * and the answer is believed only with a valid signature. An unreachable provider,
 * an error status or an answer that fails its signature is SERVICE_UNAVAILABLE:
 * nothing is known, and the caller tries again later (with the same key).
 */
export function postToProvider<S extends z.ZodType>(
  deps: ProviderClientDeps,
  api: ProviderApi,
  request: unknown,
  schema: S,
): Promise<z.output<S>> {
  const body = JSON.stringify(request);
  return callProvider(deps, api.path, api.answer, schema, (nowS) => ({
    method: "POST",
    headers: {
      "content-type": "application/json",
      [SIGNATURE_HEADER]: signBody(api.request, deps.webhookSecret, body, nowS),
    },
    body,
  }));
}

/** A signed GET (the status query): the signed text is the method and the path with its query. */
export function getFromProvider<S extends z.ZodType>(
  deps: ProviderClientDeps,
  path: string,
  schema: S,
): Promise<z.output<S>> {
  return callProvider(deps, path, "statusAnswer", schema, (nowS) => ({
    headers: { [SIGNATURE_HEADER]: signQuery(deps.webhookSecret, path, nowS) },
  }));
}

async function callProvider<S extends z.ZodType>(
  deps: ProviderClientDeps,
  path: string,
  answerKind: MessageKind,
  schema: S,
  init: (nowS: number) => RequestInit,
): Promise<z.output<S>> {
  const nowS = () => Math.floor((deps.now?.() ?? new Date()).getTime() / 1000);
  let response: Response;
  let text: string;
  try {
    response = await (deps.fetchFn ?? fetch)(`${deps.providerBaseUrl}${path}`, {
      ...init(nowS()),
      signal: AbortSignal.timeout(deps.timeoutMs ?? 5_000),
    });
    text = await response.text();
  } catch (error) {
    throw serviceUnavailable(error);
  }
  if (!response.ok) {
    throw serviceUnavailable(
      new Error(`provider answered ${response.status} to ${path}: ${text.slice(0, 200)}`),
    );
  }
  const check = verifyBodySignature(
    answerKind,
    deps.webhookSecret,
    text,
    response.headers.get(SIGNATURE_HEADER),
    nowS(),
    deps.toleranceS,
  );
  if (check !== "OK") {
    throw serviceUnavailable(new Error(`provider's answer to ${path} failed its signature check: ${check}`));
  }
  return schema.parse(JSON.parse(text));
}
