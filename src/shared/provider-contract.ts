import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";

/**
 * The mock provider's published contract (docs/provider-contract.md): what a
 * real provider's SDK would give a merchant. Both sides use it; nothing else
 * is shared between them but HTTP.
 */
export const SIGNATURE_HEADER = "provider-signature";
export const DELIVERY_ID_HEADER = "provider-delivery-id";

export const NOTIFICATION_TYPES = [
  "payment.succeeded",
  "payment.closed",
  "refund.succeeded",
  "refund.failed",
] as const;

export const notificationBodySchema = z.object({
  id: z.string().min(1).max(100),
  type: z.string().min(1).max(100),
  app_id: z.string().min(1).max(100),
  out_trade_no: z.string().min(1).max(64),
  transaction_id: z.string().min(1).max(64).nullable(),
  amount_cents: z.number().int().nonnegative(),
  currency: z.string().length(3),
  created_at: z.string().min(1).max(40),
  /** Refund notifications: which refund (amount_cents is then the refund's amount). */
  refund_no: z.string().min(1).max(64).optional(),
  /** Refund notifications: which of the provider's attempts at that refund this is about (1 if absent). */
  refund_attempt: z.number().int().positive().optional(),
});
export type NotificationBody = z.infer<typeof notificationBodySchema>;

export const MERCHANT_SUCCESS_BODY = { code: "SUCCESS" } as const;

function hmac(secret: string, message: string): string {
  return createHmac("sha256", secret).update(message).digest("hex");
}

/**
 * Every kind of signed message, named by who sends it to whom and what it is. What is signed starts with
 * the kind, so a message signed as one kind is refused as any other: a captured `refund.succeeded`
 * notification, which also parses as a refund request, cannot be replayed as one.
 */
export const MESSAGE_KINDS = {
  notification: "mockpay->merchant:notification",
  refundRequest: "merchant->mockpay:refund-request",
  refundAnswer: "mockpay->merchant:refund-answer",
  closeRequest: "merchant->mockpay:close-request",
  closeAnswer: "mockpay->merchant:close-answer",
  statusQuery: "merchant->mockpay:status-query",
  statusAnswer: "mockpay->merchant:status-answer",
} as const;
export type MessageKind = keyof typeof MESSAGE_KINDS;

function signedText(kind: MessageKind, timestampS: number | string, rawBody: string): string {
  return `${MESSAGE_KINDS[kind]}\n${timestampS}.${rawBody}`;
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<kind>\n<t>.<raw body>">` */
export function signBody(kind: MessageKind, secret: string, rawBody: string, timestampS: number): string {
  return `t=${timestampS},v1=${hmac(secret, signedText(kind, timestampS, rawBody))}`;
}

export type SignatureCheck = "OK" | "MALFORMED" | "BAD_SIGNATURE" | "STALE_TIMESTAMP";

export function verifyBodySignature(
  kind: MessageKind,
  secret: string,
  rawBody: string,
  header: string | null | undefined,
  nowS: number,
  toleranceS: number,
): SignatureCheck {
  if (!header || header.length > 500) return "MALFORMED";
  const parts = new Map(
    header.split(",").map((part) => {
      const eq = part.indexOf("=");
      return [part.slice(0, eq).trim(), part.slice(eq + 1).trim()] as const;
    }),
  );
  const t = parts.get("t");
  const v1 = parts.get("v1");
  if (!t || !/^\d{1,12}$/.test(t) || !v1 || !/^[0-9a-f]{64}$/.test(v1)) return "MALFORMED";
  // Signature first: an attacker learns nothing about our clock from a forged request.
  if (!constantTimeEqual(v1, hmac(secret, signedText(kind, t, rawBody)))) return "BAD_SIGNATURE";
  return Math.abs(nowS - Number(t)) > toleranceS ? "STALE_TIMESTAMP" : "OK";
}

/** Compares two secrets (or their signatures) in constant time. */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** The hosted pay page's parameters, signed by the merchant so nobody can change the amount. */
export interface PayRequest {
  app_id: string;
  out_trade_no: string;
  amount_cents: number;
  currency: string;
  notify_url: string;
  return_url: string;
  t: number;
  /** Unix seconds after which the link may no longer be paid (the merchant closes the order then). */
  expires_at: number;
}

function canonicalQuery(params: PayRequest): string {
  return (Object.keys(params) as (keyof PayRequest)[])
    .sort()
    .map((key) => `${key}=${encodeURIComponent(String(params[key]))}`)
    .join("&");
}

export function signPayRequest(secret: string, params: PayRequest): string {
  return hmac(secret, `pay:${canonicalQuery(params)}`);
}

export function verifyPayRequest(secret: string, params: PayRequest, sig: string): boolean {
  return /^[0-9a-f]{64}$/.test(sig) && constantTimeEqual(sig, signPayRequest(secret, params));
}

export const payRequestSchema = z.object({
  app_id: z.string().min(1).max(100),
  out_trade_no: z.string().min(1).max(64),
  amount_cents: z.coerce.number().int().positive(),
  currency: z.string().length(3),
  notify_url: z.url(),
  return_url: z.string().min(1).max(500),
  t: z.coerce.number().int().positive(),
  expires_at: z.coerce.number().int().positive(),
  sig: z.string().max(100),
});

/** The status query: `GET /provider/api/trades/{out_trade_no}?app_id=…`, request and answer both signed. */
export const tradeStatusSchema = z.object({
  app_id: z.string(),
  out_trade_no: z.string(),
  status: z.enum(["WAITING", "PAID", "CLOSED", "NOT_FOUND"]),
  transaction_id: z.string().nullable(),
  amount_cents: z.number().int().nullable(),
  currency: z.string().nullable(),
  /**
   * Refunds the provider accepted on the trade, each as it stands (SUCCEEDED, or FAILED after it was
   * accepted) with its latest attempt: the merchant's fallback for lost refund notifications.
   */
  refunds: z
    .array(
      z.object({
        refund_no: z.string(),
        amount_cents: z.number().int(),
        currency: z.string(),
        status: z.enum(["SUCCEEDED", "FAILED"]).default("SUCCEEDED"),
        attempt: z.number().int().positive().default(1),
      }),
    )
    .default([]),
});
export type TradeStatus = z.infer<typeof tradeStatusSchema>;

export function tradeQueryPath(appId: string, outTradeNo: string): string {
  return `/provider/api/trades/${encodeURIComponent(outTradeNo)}?app_id=${encodeURIComponent(appId)}`;
}

/** A GET has no body: the signed text is the method and the path with its query. */
export function signQuery(secret: string, pathWithQuery: string, timestampS: number): string {
  return signBody("statusQuery", secret, `GET ${pathWithQuery}`, timestampS);
}

export function verifyQuery(
  secret: string,
  pathWithQuery: string,
  header: string | null,
  nowS: number,
  toleranceS: number,
): SignatureCheck {
  return verifyBodySignature("statusQuery", secret, `GET ${pathWithQuery}`, header, nowS, toleranceS);
}

/** A refund request: `POST /provider/api/refunds`, body signed like a notification; the answer is signed too. */
export const refundRequestSchema = z.object({
  app_id: z.string().min(1).max(100),
  out_trade_no: z.string().min(1).max(64),
  refund_no: z.string().min(1).max(64),
  amount_cents: z.number().int().positive(),
  currency: z.string().length(3),
});
export type RefundRequest = z.infer<typeof refundRequestSchema>;

export const refundAnswerSchema = z.object({
  refund_no: z.string(),
  status: z.enum(["ACCEPTED", "REJECTED"]),
  reason: z.string().optional(),
  /** ACCEPTED: the provider's attempt number for this send (a refund that failed there, sent again, is a new attempt). */
  attempt: z.number().int().positive().optional(),
});
export type RefundAnswer = z.infer<typeof refundAnswerSchema>;

/**
 * The close API: `POST /provider/api/closes`, body signed like a notification, answer signed too.
 * Idempotent by out_trade_no. A trade the shopper never opened is closed as well, so its pay link
 * can no longer be paid; a PAID trade is not closed and the answer says PAID (the merchant then
 * applies the payment instead).
 */
export const CLOSE_PATH = "/provider/api/closes";

export const closeRequestSchema = z.object({
  app_id: z.string().min(1).max(100),
  out_trade_no: z.string().min(1).max(64),
  amount_cents: z.number().int().positive(),
  currency: z.string().length(3),
});
export type CloseRequest = z.infer<typeof closeRequestSchema>;

export const closeAnswerSchema = z.object({
  out_trade_no: z.string(),
  status: z.enum(["CLOSED", "PAID"]),
  transaction_id: z.string().nullable(),
});
export type CloseAnswer = z.infer<typeof closeAnswerSchema>;

/** A signed POST API of the provider: where it is, and the kinds its request and its answer are signed as. */
export interface ProviderApi {
  path: string;
  request: MessageKind;
  answer: MessageKind;
}

export const REFUND_API: ProviderApi = {
  path: "/provider/api/refunds",
  request: "refundRequest",
  answer: "refundAnswer",
};
export const CLOSE_API: ProviderApi = { path: CLOSE_PATH, request: "closeRequest", answer: "closeAnswer" };
