import type { z } from "zod";
import { type MessageKind, signBody, verifyBodySignature } from "~/shared/provider-contract";

/** An answer of one of MockPay's signed APIs, as its route sends it. */
export interface SignedAnswer {
  status: number;
  body: string;
  /** The answer's own signature (over the body), for the Provider-Signature header; none on a refusal. */
  signature: string | null;
}

const refusal = (status: number, message: string): SignedAnswer => ({
  status,
  body: JSON.stringify({ message }),
  signature: null,
});

/**
 * A merchant's signed request body, checked and parsed: the signature and its timestamp
 * first (401), then JSON and the schema (400). Either the request or the refusal to send.
 */
export function readSignedRequest<S extends z.ZodType>(
  kind: MessageKind,
  raw: { body: string; signature: string | null },
  schema: S,
  secret: string,
  nowS: number,
): { request: z.output<S> } | { refused: SignedAnswer } {
  const check = verifyBodySignature(kind, secret, raw.body, raw.signature, nowS, 300);
  if (check !== "OK") return { refused: refusal(401, `signature: ${check}`) };
  let json: unknown;
  try {
    json = JSON.parse(raw.body);
  } catch {
    return { refused: refusal(400, "body is not JSON") };
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? { request: parsed.data } : { refused: refusal(400, "malformed request") };
}

/** A 200 whose body MockPay signs, so the merchant can believe it. */
export function signedAnswer(kind: MessageKind, answer: unknown, secret: string, nowS: number): SignedAnswer {
  const body = JSON.stringify(answer);
  return { status: 200, body, signature: signBody(kind, secret, body, nowS) };
}

export function refused(status: number, message: string): SignedAnswer {
  return refusal(status, message);
}
