import type { z } from "zod";
import { serviceUnavailable } from "~/server/errors";
import { SIGNATURE_HEADER, signBody, verifyBodySignature } from "~/shared/provider-contract";

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
 * A signed POST to the provider, and its signed answer parsed by `schema`. An
 * unreachable provider, an error status or an answer that fails its signature is
 * SERVICE_UNAVAILABLE: nothing is known, and the caller retries with the same key.
 */
export async function postToProvider<S extends z.ZodType>(
  deps: ProviderClientDeps,
  path: string,
  request: unknown,
  schema: S,
): Promise<z.output<S>> {
  const body = JSON.stringify(request);
  const nowS = () => Math.floor((deps.now?.() ?? new Date()).getTime() / 1000);
  let response: Response;
  let text: string;
  try {
    response = await (deps.fetchFn ?? fetch)(`${deps.providerBaseUrl}${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        [SIGNATURE_HEADER]: signBody(deps.webhookSecret, body, nowS()),
      },
      body,
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
    deps.webhookSecret,
    text,
    response.headers.get(SIGNATURE_HEADER),
    nowS(),
    deps.toleranceS,
  );
  if (check !== "OK")
    throw serviceUnavailable(new Error(`provider's answer to ${path} failed its signature: ${check}`));
  return schema.parse(JSON.parse(text));
}
