import { randomBytes } from "node:crypto";
import { and, eq, type SQL, sql } from "drizzle-orm";
import {
  type NotificationBody,
  type PayRequest,
  type TradeStatus,
  verifyPayRequest,
} from "~/shared/provider-contract";
import { onlyFrom, type Transition } from "~/shared/state-machine";
import type { MockPayDb, MockPayExecutor } from "./db";
import { MockPayError } from "./errors";
import { TRADE_MACHINE } from "./machine";
import { providerNotification, providerRefund, providerTrade } from "./schema";

const TRADE = TRADE_MACHINE.transitions;
type ProviderTradeStatus = (typeof TRADE_MACHINE.states)[number];

export type ProviderTrade = typeof providerTrade.$inferSelect;

/**
 * The hosted pay page opens a trade from the merchant's signed request. Opening
 * the same out_trade_no again (a reload) returns the same trade.
 */
export async function openTrade(
  db: MockPayDb,
  request: PayRequest,
  sig: string,
  secret: string,
): Promise<ProviderTrade> {
  if (!verifyPayRequest(secret, request, sig)) {
    throw new MockPayError("INVALID_REQUEST", "the payment request's signature does not match");
  }
  const expiresAt = new Date(request.expires_at * 1000);
  if (expiresAt.getTime() <= nowMs()) {
    // An expired link opens nothing new; a trade it opened earlier is still shown as it stands.
    const [known] = await db
      .select()
      .from(providerTrade)
      .where(
        and(eq(providerTrade.appId, request.app_id), eq(providerTrade.outTradeNo, request.out_trade_no)),
      );
    if (!known)
      throw new MockPayError("LINK_EXPIRED", "This payment link has expired: ask the shop for a new one.");
    return known.status === "WAITING" ? expireTrade(db, known) : known;
  }
  const [created] = await db
    .insert(providerTrade)
    .values({
      appId: request.app_id,
      outTradeNo: request.out_trade_no,
      amountCents: request.amount_cents,
      currency: request.currency,
      notifyUrl: request.notify_url,
      returnUrl: request.return_url,
      expiresAt,
      status: TRADE.open.to,
    })
    .onConflictDoNothing({ target: [providerTrade.appId, providerTrade.outTradeNo] })
    .returning();
  if (created) return created;
  const existing = await getTrade(db, request.app_id, request.out_trade_no);
  if (existing.amountCents !== request.amount_cents || existing.currency !== request.currency) {
    throw new MockPayError("INVALID_REQUEST", "this out_trade_no was opened with another amount");
  }
  if (existing.notifyUrl === "") {
    // The merchant closed it before anyone opened it: it stays closed, now with somewhere to go back to.
    const urls = { notifyUrl: request.notify_url, returnUrl: request.return_url };
    await completeClosedTrade(db, request.app_id, request.out_trade_no, urls);
    return { ...existing, ...urls };
  }
  return existing;
}

export async function getTrade(
  db: MockPayExecutor,
  appId: string,
  outTradeNo: string,
): Promise<ProviderTrade> {
  const [trade] = await db
    .select()
    .from(providerTrade)
    .where(and(eq(providerTrade.appId, appId), eq(providerTrade.outTradeNo, outTradeNo)));
  if (!trade) throw new MockPayError("NOT_FOUND", `no trade ${outTradeNo}`);
  return trade;
}

/**
 * The shopper confirmed on the pay page: WAITING → PAID once, and one notification for that fact.
 * Past the link's expiry nothing is paid: the trade closes instead, as a provider's does at its time limit.
 */
export async function confirmTrade(db: MockPayDb, appId: string, outTradeNo: string): Promise<ProviderTrade> {
  const trade = await settleTrade(
    db,
    appId,
    outTradeNo,
    TRADE.pay,
    {
      transactionId: `T${Date.now()}${randomBytes(5).toString("hex").toUpperCase()}`,
      paidAt: sql`now()`,
    },
    sql`(${providerTrade.expiresAt} IS NULL OR ${providerTrade.expiresAt} > now())`,
  );
  return trade.status === "WAITING" ? expireTrade(db, trade) : trade;
}

/** A WAITING trade past its expiry closes (once, with its notification). */
function expireTrade(db: MockPayDb, trade: ProviderTrade): Promise<ProviderTrade> {
  return settleTrade(db, trade.appId, trade.outTradeNo, TRADE.close);
}

const nowMs = () => Date.now();

/** The shopper cancelled: WAITING → CLOSED once, and one notification for that fact. */
export function cancelTrade(db: MockPayDb, appId: string, outTradeNo: string): Promise<ProviderTrade> {
  return settleTrade(db, appId, outTradeNo, TRADE.close);
}

async function settleTrade(
  db: MockPayDb,
  appId: string,
  outTradeNo: string,
  transition: Transition<ProviderTradeStatus>,
  also: { transactionId?: string; paidAt?: SQL } = {},
  onlyIf: SQL = sql`true`,
): Promise<ProviderTrade> {
  return db.transaction(async (tx) => {
    const [moved] = await tx
      .update(providerTrade)
      .set({ ...also, status: transition.to, updatedAt: sql`now()` })
      .where(
        and(
          eq(providerTrade.appId, appId),
          eq(providerTrade.outTradeNo, outTradeNo),
          eq(providerTrade.status, onlyFrom(transition)),
          onlyIf,
        ),
      )
      .returning();
    const trade = moved ?? (await getTrade(tx, appId, outTradeNo));
    // A repeat (or a second click) finds the notification already queued: ON CONFLICT keeps one.
    if (trade.status === transition.to) {
      await queueNotification(tx, trade, transition === TRADE.pay ? "payment.succeeded" : "payment.closed");
    }
    return trade;
  });
}

/** One notification per (trade, type): the same id on every redelivery. */
export async function queueNotification(
  tx: MockPayExecutor,
  trade: ProviderTrade,
  type: NotificationBody["type"],
  refund?: { refundNo: string; amountCents: number; attempt: number },
) {
  const body: NotificationBody = {
    id: `evt_${randomBytes(12).toString("hex")}`,
    type,
    app_id: trade.appId,
    out_trade_no: trade.outTradeNo,
    transaction_id: trade.transactionId,
    amount_cents: refund?.amountCents ?? trade.amountCents,
    currency: trade.currency,
    created_at: new Date().toISOString(),
    ...(refund ? { refund_no: refund.refundNo, refund_attempt: refund.attempt } : {}),
  };
  // A refund's fact is its outcome on one attempt: a refund that failed, sent again, can fail (or succeed) anew.
  const factKey = refund ? `${type}:${refund.refundNo}:${refund.attempt}` : type;
  await tx
    .insert(providerNotification)
    .values({ id: body.id, tradeId: trade.id, type, factKey, body })
    .onConflictDoNothing({ target: [providerNotification.tradeId, providerNotification.factKey] });
}

/** The answer to the merchant's status query. */
export async function tradeStatus(db: MockPayDb, appId: string, outTradeNo: string): Promise<TradeStatus> {
  const [trade] = await db
    .select()
    .from(providerTrade)
    .where(and(eq(providerTrade.appId, appId), eq(providerTrade.outTradeNo, outTradeNo)));
  const refunds = trade
    ? await db
        .select({
          refundNo: providerRefund.refundNo,
          amountCents: providerRefund.amountCents,
          status: providerRefund.status,
          attempt: providerRefund.attempts,
        })
        .from(providerRefund)
        .where(eq(providerRefund.tradeId, trade.id))
        .orderBy(providerRefund.createdAt)
    : [];
  return {
    app_id: appId,
    out_trade_no: outTradeNo,
    status: trade?.status ?? "NOT_FOUND",
    transaction_id: trade?.transactionId ?? null,
    amount_cents: trade?.amountCents ?? null,
    currency: trade?.currency ?? null,
    refunds: refunds.map((r) => ({
      refund_no: r.refundNo,
      amount_cents: r.amountCents,
      currency: trade?.currency ?? "",
      status: r.status,
      attempt: r.attempt,
    })),
  };
}

/** The pay page opened a trade the merchant had already closed: fill in the addresses it lacked. */
async function completeClosedTrade(
  db: MockPayDb,
  appId: string,
  outTradeNo: string,
  urls: { notifyUrl: string; returnUrl: string },
) {
  await db
    .update(providerTrade)
    .set(urls)
    .where(
      and(
        eq(providerTrade.appId, appId),
        eq(providerTrade.outTradeNo, outTradeNo),
        eq(providerTrade.notifyUrl, ""),
      ),
    );
}
