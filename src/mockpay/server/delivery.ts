import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import {
  DELIVERY_ID_HEADER,
  type NotificationBody,
  SIGNATURE_HEADER,
  signBody,
} from "~/shared/provider-contract";
import type { MockPayDb } from "./db";
import {
  disableEndpoint,
  type Endpoint,
  type EndpointDefaults,
  endpointFor,
  pauseEndpoint,
  signingKeys,
} from "./endpoints";
import { providerDeliveryAttempt, providerNotification, providerTrade } from "./schema";
import { standardSignature } from "./standard-signing";
import type { ProviderTrade } from "./trades";

/** WeChat Pay's published schedule (seconds after each failed attempt), about 24 h in all. */
export const WECHAT_SCHEDULE_S = [
  15, 15, 30, 180, 600, 1200, 1800, 1800, 1800, 3600, 10800, 10800, 10800, 21600, 21600,
];
/** Alipay's: 4 min, 10 min, 10 min, 1 h, 2 h, 6 h, 15 h. */
export const ALIPAY_SCHEDULE_S = [240, 600, 600, 3600, 7200, 21600, 54000];
export const RETRY_SCHEDULES = { wechat: WECHAT_SCHEDULE_S, alipay: ALIPAY_SCHEDULE_S } as const;
export const RETRY_SCHEDULE_S = WECHAT_SCHEDULE_S;
/**
 * Standard Webhooks' schedule for an endpoint in that format: after the first attempt (at once), 5 s, 5 min,
 * 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h.
 */
export const STANDARD_WEBHOOKS_SCHEDULE_S = [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400];
/** Answers by which a Standard Webhooks endpoint says "slower": the next attempt waits for Retry-After too. */
const SLOW_DOWN = new Set([429, 502, 504]);

/** What a real merchant endpoint gets: a provider gives up on it after 5 s. */
export const MERCHANT_TIMEOUT_MS = 5_000;

export interface DeliveryDeps {
  webhookSecret: string;
  /** 1 = real time; 0.01 turns the first 15 s retry into 150 ms. */
  timeScale: number;
  /** Two copies at once on the first attempt and one more after success, as real providers do. */
  sendDuplicates: boolean;
  timeoutMs?: number;
  fetchFn?: typeof fetch;
  schedule?: readonly number[];
  /** What a merchant endpoint MockPay first sends to starts as (legacy unless said). */
  endpoints?: EndpointDefaults;
}

export type DeliveryFault = "TAMPERED_SIGNATURE" | "WRONG_AMOUNT" | "STALE_TIMESTAMP";

export interface DeliveryResult {
  deliveryId: string;
  ok: boolean;
  httpStatus: number | null;
  latencyMs: number;
  /** A Standard Webhooks endpoint asked to wait this long (Retry-After, time-scaled) before the next attempt. */
  retryAfterMs?: number;
}

type Notification = typeof providerNotification.$inferSelect;

/**
 * Sends every notification that is due. Several workers (or app instances) can
 * run this at once: each notification is claimed with SKIP LOCKED and its next
 * attempt pushed out before it is sent.
 */
export async function deliverDueNotifications(
  db: MockPayDb,
  deps: DeliveryDeps,
  limit = 10,
): Promise<number> {
  const claimed = await db.execute<{ id: string; attempts: number }>(sql`
    UPDATE provider_notification
       SET attempts = attempts + 1, next_attempt_at = now() + interval '60 seconds'
     WHERE id IN (SELECT n.id FROM provider_notification n
                    JOIN provider_trade t ON t.id = n.trade_id
                    LEFT JOIN provider_endpoint e ON e.app_id = t.app_id AND e.url = t.notify_url
                   WHERE n.status = 'PENDING' AND n.next_attempt_at <= now()
                     -- An endpoint disabled (410) or told to wait (429, 502, 504) is not sent to meanwhile.
                     AND (e.id IS NULL OR (e.status = 'ENABLED' AND (e.paused_until IS NULL OR e.paused_until <= now())))
                   ORDER BY n.next_attempt_at
                   LIMIT ${limit}
                   FOR UPDATE OF n SKIP LOCKED)
    RETURNING id, attempts`);
  await Promise.all(claimed.map((row) => deliverOne(db, row.id, row.attempts, deps)));
  return claimed.length;
}

async function deliverOne(db: MockPayDb, notificationId: string, attemptNo: number, deps: DeliveryDeps) {
  const { notification, trade } = await loadNotification(db, notificationId);
  // Looked up once for the attempt: its copies are signed, and its next attempt scheduled, by the same endpoint.
  const endpoint = await endpointFor(db, trade.appId, trade.notifyUrl, deps.endpoints ?? { mode: "legacy" });
  const copies = attemptNo === 1 && deps.sendDuplicates ? 2 : 1;
  const results = await Promise.all(
    Array.from({ length: copies }, (_, i) =>
      sendNotification(
        db,
        notification,
        trade,
        { attemptNo, kind: i === 0 ? "SCHEDULED" : "DUPLICATE", endpoint },
        deps,
      ),
    ),
  );
  if (results.some((r) => r.ok)) {
    await db
      .update(providerNotification)
      .set({ status: "DELIVERED", deliveredAt: sql`now()` })
      .where(
        sql`${providerNotification.id} = ${notificationId} AND ${providerNotification.status} = 'PENDING'`,
      );
    if (deps.sendDuplicates) {
      await sendNotification(
        db,
        notification,
        trade,
        { attemptNo, kind: "DUPLICATE_AFTER_SUCCESS", endpoint },
        deps,
      );
    }
    return;
  }
  const schedule =
    endpoint.format === "standard" ? STANDARD_WEBHOOKS_SCHEDULE_S : (deps.schedule ?? RETRY_SCHEDULE_S);
  const delayS = schedule[attemptNo - 1];
  const waitMs = Math.max((delayS ?? 0) * deps.timeScale * 1000, ...results.map((r) => r.retryAfterMs ?? 0));
  await db
    .update(providerNotification)
    .set(
      delayS === undefined
        ? { status: "GAVE_UP" }
        : { nextAttemptAt: sql`now() + ${waitMs} * interval '1 millisecond'` },
    )
    .where(
      sql`${providerNotification.id} = ${notificationId} AND ${providerNotification.status} = 'PENDING'`,
    );
}

export async function loadNotification(db: MockPayDb, notificationId: string) {
  const [row] = await db
    .select({ notification: providerNotification, trade: providerTrade })
    .from(providerNotification)
    .innerJoin(providerTrade, eq(providerTrade.id, providerNotification.tradeId))
    .where(eq(providerNotification.id, notificationId));
  if (!row) throw new Error(`no notification ${notificationId}`);
  return row;
}

/** One HTTP delivery with its own delivery id, recorded with its answer and latency. */
export async function sendNotification(
  db: MockPayDb,
  notification: Notification,
  trade: ProviderTrade,
  options: {
    attemptNo: number;
    kind: string;
    fault?: DeliveryFault;
    body?: NotificationBody;
    /** The trade's endpoint, when the caller has it already (else it is looked up, and made the first time). */
    endpoint?: Endpoint;
  },
  deps: DeliveryDeps,
): Promise<DeliveryResult> {
  const deliveryId = randomUUID();
  const started = Date.now();
  const record = async (
    result: Omit<DeliveryResult, "deliveryId" | "latencyMs">,
    extra: { responseBody?: string; error?: string },
  ) => {
    const latencyMs = Date.now() - started;
    await db.insert(providerDeliveryAttempt).values({
      id: deliveryId,
      notificationId: notification.id,
      attemptNo: options.attemptNo,
      kind: options.fault ?? options.kind,
      latencyMs,
      httpStatus: result.httpStatus,
      responseBody: extra.responseBody?.slice(0, 500) ?? null,
      error: extra.error?.slice(0, 500) ?? null,
      ok: result.ok,
    });
    return { deliveryId, latencyMs, ...result };
  };

  if (trade.dropNotifications)
    return record({ ok: false, httpStatus: null }, { error: "dropped (fault injection)" });

  const body: NotificationBody = { ...(options.body ?? (notification.body as NotificationBody)) };
  if (options.fault === "WRONG_AMOUNT") body.amount_cents += 1;
  const raw = JSON.stringify(body);
  const nowS = Math.floor(Date.now() / 1000);
  const timestampS = options.fault === "STALE_TIMESTAMP" ? nowS - 3600 : nowS;
  // Every signature with one bit of it flipped: well formed, and matching nothing.
  const tamper = (signature: string) =>
    signature
      .split(" ")
      .map((entry) => {
        const [version, value = ""] = entry.split(",");
        const bytes = Buffer.from(value, "base64");
        bytes[0] = (bytes[0] ?? 0) ^ 1;
        return `${version},${bytes.toString("base64")}`;
      })
      .join(" ");
  const endpoint =
    options.endpoint ??
    (await endpointFor(db, trade.appId, trade.notifyUrl, deps.endpoints ?? { mode: "legacy" }));
  const standard = endpoint.format === "standard";
  let headers: Record<string, string>;
  if (standard) {
    // Standard Webhooks: the notification's id is the message id, the same on every attempt (the merchant
    // dedupes by it); every key not yet retired signs, so a rotation overlaps.
    const signature = standardSignature(notification.id, timestampS, raw, await signingKeys(db, endpoint.id));
    headers = {
      "content-type": "application/json",
      "webhook-id": notification.id,
      "webhook-timestamp": String(timestampS),
      "webhook-signature": options.fault === "TAMPERED_SIGNATURE" ? tamper(signature) : signature,
    };
  } else {
    let signature = signBody("notification", deps.webhookSecret, raw, timestampS);
    if (options.fault === "TAMPERED_SIGNATURE")
      signature = signature.replace(/.$/, (c) => (c === "0" ? "1" : "0"));
    headers = {
      "content-type": "application/json",
      [SIGNATURE_HEADER]: signature,
      [DELIVERY_ID_HEADER]: deliveryId,
    };
  }

  try {
    const response = await (deps.fetchFn ?? fetch)(trade.notifyUrl, {
      method: "POST",
      headers,
      body: raw,
      // A redirect is an answer, not a place to send it again: Standard Webhooks counts 3xx as a failure.
      redirect: "manual",
      signal: AbortSignal.timeout(deps.timeoutMs ?? MERCHANT_TIMEOUT_MS),
    });
    const text = await response.text();
    if (standard) {
      const status = response.status;
      if (status === 410) await disableEndpoint(db, endpoint.id, `410 Gone, ${new Date().toISOString()}`);
      let retryAfterMs: number | undefined;
      if (SLOW_DOWN.has(status) || response.headers.has("retry-after")) {
        retryAfterMs = retryAfterOf(response.headers.get("retry-after")) * deps.timeScale;
        if (SLOW_DOWN.has(status)) await pauseEndpoint(db, endpoint.id, retryAfterMs);
      }
      const result = await record(
        { ok: status >= 200 && status < 300, httpStatus: status },
        { responseBody: text },
      );
      return retryAfterMs === undefined ? result : { ...result, retryAfterMs };
    }
    let acknowledged = false;
    try {
      acknowledged = response.status === 200 && (JSON.parse(text) as { code?: unknown }).code === "SUCCESS";
    } catch {
      acknowledged = false;
    }
    return record({ ok: acknowledged, httpStatus: response.status }, { responseBody: text });
  } catch (error) {
    const message =
      error instanceof Error && error.name === "TimeoutError" ? "merchant timed out" : String(error);
    return record({ ok: false, httpStatus: null }, { error: message });
  }
}

/**
 * Retry-After (RFC 9110 §10.2.3) in milliseconds: seconds, or an HTTP date; absent or unreadable, a
 * 429/502/504 still waits 5 s, the schedule's first step.
 */
export function retryAfterOf(value: string | null): number {
  const fallback = 5_000;
  if (!value) return fallback;
  if (/^\d{1,9}$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? fallback : Math.max(0, at - Date.now());
}
