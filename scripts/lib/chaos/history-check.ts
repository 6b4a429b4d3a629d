import type { Db } from "~/server/db/client";
import { createOrderOperation } from "~/server/orders/create-order";
import { createRefundOperation } from "~/server/refunds/create-refund";
import type { HistoryLine } from "./history";

/**
 * Reads a chaos run's history (what every client was told) against what the database and MockPay hold once
 * the run has settled, as Jepsen's checkers read theirs:
 * - the history is well formed: each completion follows its own invoke, once;
 * - answers to one key never disagree: every success names the same order (or refund), a refusal the
 *   operation stores is never mixed with a success or another refusal, and an order's cancels agree;
 * - every acknowledged order and refund exists with exactly what the client was told; a key whose
 *   attempts were all refused has no effect; a key whose outcome the client never learnt (`info`)
 *   resolved to zero or one effect, and if one, the one it asked for;
 * - every trade MockPay captured was confirmed by the shopper (ok or unknown), and the merchant applied
 *   it once (one capture in its ledger);
 * - the server's evidence for each order and refund key (the attempt log the order's story draws) has at
 *   most one copy that took effect, and every copy answered without running names what absorbed it;
 * - money is conserved per order, as MockPay's own books say: nothing refunded beyond what was captured;
 *   nothing kept by an order that ended keeping nothing, or by a payment that was not the order's; and
 *   an order that kept its goods was paid what its shopper was told, less its refunds.
 */
export interface Anomaly {
  f: string;
  key: string;
  message: string;
  /** The history lines it rests on. */
  lines: number[];
}

export interface HistoryVerdict {
  operations: number;
  keys: number;
  /** Attempts whose outcome the client never learnt, and how many of their keys ended with an effect. */
  unknown: number;
  unknownResolved: { withEffect: number; without: number };
  /** Copies of those keys the server absorbed, each naming what absorbed it (the story's evidence). */
  absorbedCopies: number;
  anomalies: Anomaly[];
}

const STORED: Record<string, readonly string[]> = {
  "orders.create": createOrderOperation.storedErrors,
  "refunds.create": createRefundOperation.storedErrors,
};
/** Refusals that say only "not now" (the client sends the same request again): no claim about the key. */
const TRANSIENT = new Set(["REQUEST_IN_PROGRESS", "RATE_LIMITED", "IDEMPOTENCY_KEY_REUSED"]);

interface Attempt {
  f: string;
  key: string;
  process: string;
  invoke: HistoryLine;
  done?: HistoryLine;
  /** The outcome: a completion's type, or info for an invoke never completed. */
  outcome: "ok" | "fail" | "info";
  user: string;
}

interface KeyGroup {
  f: string;
  key: string;
  attempts: Attempt[];
  user: string;
}

export function formatAnomaly(a: Anomaly): string {
  const lines = a.lines.slice(0, 8).join(", ") + (a.lines.length > 8 ? ` … (${a.lines.length})` : "");
  return `${a.f} ${a.key}: ${a.message} [history lines ${lines}]`;
}

export function verdictLine(v: HistoryVerdict): string {
  return (
    `history checker: ${v.operations} operations on ${v.keys} keys checked; ${v.unknown} outcomes unknown to ` +
    `the client resolved (${v.unknownResolved.withEffect} keys with their effect, ${v.unknownResolved.without} ` +
    `without); ${v.absorbedCopies} copies the server absorbed, each naming what absorbed it; anomalies ${v.anomalies.length}`
  );
}

/** Pairs invokes with completions; anomalies for a completion without its invoke, or a second one. */
function attemptsOf(events: HistoryLine[]): { attempts: Attempt[]; anomalies: Anomaly[] } {
  const anomalies: Anomaly[] = [];
  const open = new Map<number, Attempt>();
  const attempts: Attempt[] = [];
  for (const event of events) {
    if (event.type === "invoke") {
      if (open.has(event.op)) {
        anomalies.push({ ...event, message: `operation ${event.op} invoked twice`, lines: [event.line] });
        continue;
      }
      const attempt: Attempt = {
        f: event.f,
        key: event.key,
        process: event.process,
        invoke: event,
        outcome: "info",
        user: event.user,
      };
      open.set(event.op, attempt);
      attempts.push(attempt);
      continue;
    }
    const attempt = open.get(event.op);
    if (!attempt) {
      anomalies.push({
        ...event,
        message: `a completion (${event.type}) of operation ${event.op} that was never invoked`,
        lines: [event.line],
      });
    } else if (attempt.done) {
      anomalies.push({
        ...event,
        message: `operation ${event.op} completed twice (${attempt.done.type}, then ${event.type})`,
        lines: [attempt.done.line, event.line],
      });
    } else if (attempt.f !== event.f || attempt.key !== event.key || attempt.process !== event.process) {
      anomalies.push({
        ...event,
        message: `operation ${event.op} completed as another operation (${attempt.process} ${attempt.f} ${attempt.key})`,
        lines: [attempt.invoke.line, event.line],
      });
    } else {
      attempt.done = event;
      attempt.outcome = event.type;
      attempt.user = event.user || attempt.user;
    }
  }
  return { attempts, anomalies };
}

function groupsOf(attempts: Attempt[]): KeyGroup[] {
  const groups = new Map<string, KeyGroup>();
  for (const attempt of attempts) {
    const id = `${attempt.f}\u0000${attempt.key}`;
    const group = groups.get(id) ?? { f: attempt.f, key: attempt.key, attempts: [], user: "" };
    group.attempts.push(attempt);
    group.user ||= attempt.user;
    groups.set(id, group);
  }
  return [...groups.values()];
}

/** What an attempt was told (its completion's value). */
const answerOf = (a: Attempt) => (a.done?.value ?? {}) as Record<string, unknown>;
const codeOf = (a: Attempt) => String(answerOf(a).code ?? "");
const lines = (attempts: Attempt[]) =>
  attempts.flatMap((a) => (a.done ? [a.invoke.line, a.done.line] : [a.invoke.line]));
const oks = (g: KeyGroup) => g.attempts.filter((a) => a.outcome === "ok");
const unknowns = (g: KeyGroup) => g.attempts.filter((a) => a.outcome === "info");
const allRefused = (g: KeyGroup) => g.attempts.every((a) => a.outcome === "fail");

/** What identifies the effect an answer names: two answers to one key must name the same. */
function identity(f: string, value: unknown): string {
  const v = (value ?? {}) as Record<string, unknown>;
  if (f === "orders.create")
    return `order ${v.orderId} for ${v.amountCents} (discount ${v.discountCents ?? 0})`;
  if (f === "refunds.create") return `refund ${v.refundNo} for ${v.amountCents}`;
  return JSON.stringify(v);
}

/** Answers to one key never disagree (no database needed). */
function disagreements(groups: KeyGroup[]): Anomaly[] {
  const anomalies: Anomaly[] = [];
  for (const g of groups) {
    const stored = STORED[g.f];
    if (stored) {
      const named = new Map<string, Attempt[]>();
      for (const a of oks(g)) {
        const id = identity(g.f, a.done?.value);
        named.set(id, [...(named.get(id) ?? []), a]);
      }
      for (const a of g.attempts.filter((a) => a.outcome === "fail" && stored.includes(codeOf(a)))) {
        const id = `the stored refusal ${codeOf(a)}`;
        named.set(id, [...(named.get(id) ?? []), a]);
      }
      if (named.size > 1) {
        anomalies.push({
          f: g.f,
          key: g.key,
          message: `answers disagree: ${[...named.keys()].join("; ")}`,
          lines: lines([...named.values()].flat()),
        });
      }
    }
    if (g.f === "orders.cancel") {
      // An order is closed once and stays closed; a paid one never closes: its cancels all say the same.
      const said = new Map<string, Attempt[]>();
      for (const a of g.attempts) {
        const told =
          a.outcome === "ok"
            ? String(answerOf(a).status)
            : a.outcome === "fail" && !TRANSIENT.has(codeOf(a))
              ? codeOf(a)
              : undefined;
        if (told) said.set(told, [...(said.get(told) ?? []), a]);
      }
      if (said.size > 1)
        anomalies.push({
          f: g.f,
          key: g.key,
          message: `cancels of one order answered ${[...said.keys()].join(" and ")}`,
          lines: lines([...said.values()].flat()),
        });
    }
  }
  return anomalies;
}

type Lines = { skuId: string; quantity: number }[];
const linesKey = (items: Lines) => {
  const total = new Map<string, number>();
  for (const { skuId, quantity } of items) total.set(skuId, (total.get(skuId) ?? 0) + quantity);
  return [...total.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([sku, n]) => `${sku}×${n}`)
    .join(", ");
};

/**
 * Checks a history against the settled database (the merchant's tables and MockPay's, one database in a
 * run). The history is assumed read with `readHistory`, so every event has its line.
 */
export async function checkHistory(db: Db, events: HistoryLine[]): Promise<HistoryVerdict> {
  const { attempts, anomalies } = attemptsOf(events);
  const groups = groupsOf(attempts);
  anomalies.push(...disagreements(groups));
  const sql = db.$client;
  const byF = (f: string) => groups.filter((g) => g.f === f);
  const resolved = { withEffect: 0, without: 0 };
  const resolve = (g: KeyGroup, effects: number) => {
    if (oks(g).length === 0 && unknowns(g).length > 0) {
      if (effects > 0) resolved.withEffect++;
      else resolved.without++;
    }
  };

  // Orders: one per key, as told.
  const orderKeys = byF("orders.create");
  const orderRows = await sql<
    {
      id: string;
      user_id: string;
      request_id: string;
      amount_cents: number;
      discount_cents: number;
      status: string;
      lines: Lines;
    }[]
  >`SELECT o.id, o.user_id, o.request_id, o.amount_cents::int, o.discount_cents, o.status,
           coalesce((SELECT json_agg(json_build_object('skuId', i.sku_id, 'quantity', i.quantity))
                       FROM order_item i WHERE i.user_id = o.user_id AND i.order_id = o.id), '[]') AS lines
      FROM orders o WHERE o.request_id = ANY(${orderKeys.map((g) => g.key)}::text[])`;
  const ordersByKey = new Map<string, (typeof orderRows)[number][]>();
  for (const row of orderRows)
    ordersByKey.set(row.request_id, [...(ordersByKey.get(row.request_id) ?? []), row]);
  const orderOf = new Map<string, { id: string; amount: number; status: string; user: string }>();
  for (const g of orderKeys) {
    const rows = (ordersByKey.get(g.key) ?? []).filter((r) => !g.user || r.user_id === g.user);
    const at = lines(g.attempts);
    resolve(g, rows.length);
    const asked = linesKey(((g.attempts[0]?.invoke.value ?? {}) as { items?: Lines }).items ?? []);
    if (rows.length > 1) {
      anomalies.push({ f: g.f, key: g.key, message: `${rows.length} orders for one key`, lines: at });
      continue;
    }
    const row = rows[0];
    if (row)
      orderOf.set(row.id, { id: row.id, amount: row.amount_cents, status: row.status, user: row.user_id });
    const told = oks(g)[0]?.done?.value as
      | { orderId: string; amountCents: number; discountCents?: number }
      | undefined;
    if (told) {
      if (!row)
        anomalies.push({
          f: g.f,
          key: g.key,
          message: `acknowledged order ${told.orderId} does not exist`,
          lines: at,
        });
      else if (
        row.id !== told.orderId ||
        row.amount_cents !== told.amountCents ||
        row.discount_cents !== (told.discountCents ?? 0)
      )
        anomalies.push({
          f: g.f,
          key: g.key,
          message: `told ${identity(g.f, told)}, the database has order ${row.id} for ${row.amount_cents} (discount ${row.discount_cents})`,
          lines: at,
        });
    } else if (row && allRefused(g)) {
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `every attempt was refused (${g.attempts.map(codeOf).join(", ")}), yet order ${row.id} exists`,
        lines: at,
      });
    }
    if (row && linesKey(row.lines) !== asked)
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `order ${row.id} holds ${linesKey(row.lines)}; the request asked for ${asked}`,
        lines: at,
      });
  }

  // Refunds: one per key, for what the answer said.
  const refundKeys = byF("refunds.create");
  const refundRows = await sql<
    { user_id: string; refund_no: string; order_id: string; amount_cents: number; status: string }[]
  >`SELECT user_id, refund_no, order_id, amount_cents::int, status FROM refund_order
     WHERE refund_no = ANY(${refundKeys.map((g) => g.key)}::text[])`;
  for (const g of refundKeys) {
    const rows = refundRows.filter((r) => r.refund_no === g.key && (!g.user || r.user_id === g.user));
    const at = lines(g.attempts);
    resolve(g, rows.length);
    const asked = (g.attempts[0]?.invoke.value ?? {}) as { orderId?: string };
    const told = oks(g)[0]?.done?.value as { refundNo: string; amountCents: number } | undefined;
    const row = rows[0];
    if (rows.length > 1)
      anomalies.push({ f: g.f, key: g.key, message: `${rows.length} refunds for one key`, lines: at });
    else if (told && !row)
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `acknowledged refund ${told.refundNo} does not exist`,
        lines: at,
      });
    else if (told && row && row.amount_cents !== told.amountCents)
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `told ${identity(g.f, told)}, the database has it for ${row.amount_cents}`,
        lines: at,
      });
    else if (!told && row && allRefused(g))
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `every attempt was refused (${g.attempts.map(codeOf).join(", ")}), yet the refund exists (${row.status})`,
        lines: at,
      });
    if (row && asked.orderId && row.order_id !== asked.orderId)
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `the refund is on order ${row.order_id}; it was asked for order ${asked.orderId}`,
        lines: at,
      });
  }

  // Cancels: an order told CLOSED is closed.
  for (const g of byF("orders.cancel")) {
    const closedAnswers = oks(g).filter((a) => answerOf(a).status === "CLOSED");
    const order = orderOf.get(g.key);
    if (closedAnswers.length > 0 && order && order.status !== "CLOSED")
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `the cancel answered CLOSED; the order is ${order.status}`,
        lines: lines(closedAnswers),
      });
  }

  // Payments and MockPay: each trade a pay answer named is the order's, for its amount; each captured trade
  // was confirmed by the shopper and applied once by the merchant.
  const trades = await sql<
    {
      out_trade_no: string;
      order_id: string | null;
      payment_amount: number | null;
      payment_status: string | null;
      trade_status: string;
      captured: number;
      refunded: number;
      merchant_refunded: number;
      captures: number;
    }[]
  >`SELECT t.out_trade_no, p.order_id, p.amount_cents::int AS payment_amount, p.status AS payment_status,
           t.status AS trade_status,
           (CASE WHEN t.status = 'PAID' THEN t.amount_cents ELSE 0 END)::int AS captured,
           coalesce((SELECT sum(r.amount_cents) FROM provider_refund r WHERE r.trade_id = t.id AND r.status = 'SUCCEEDED'), 0)::int AS refunded,
           coalesce((SELECT sum(r.amount_cents) FROM refund_order r
                      WHERE r.user_id = p.user_id AND r.payment_id = p.id AND r.status = 'REFUND_SUCCESS'), 0)::int AS merchant_refunded,
           (SELECT count(*)::int FROM ledger_transfer l
             WHERE l.user_id = p.user_id AND l.payment_id = p.id AND l.fact_key LIKE 'capture:%') AS captures
      FROM provider_trade t LEFT JOIN payment_order p ON p.out_trade_no = t.out_trade_no
     WHERE p.order_id = ANY(${[...orderOf.keys()]}::uuid[])`;
  const tradeByNo = new Map(trades.map((t) => [t.out_trade_no, t]));
  for (const g of byF("payments.create")) {
    for (const a of oks(g)) {
      const told = a.done?.value as { outTradeNo: string; amountCents: number };
      const trade = tradeByNo.get(told.outTradeNo);
      const order = orderOf.get(g.key);
      if (!order) continue;
      if (!trade || trade.order_id !== g.key || trade.payment_amount !== order.amount)
        anomalies.push({
          f: g.f,
          key: g.key,
          message: `the pay answer named trade ${told.outTradeNo}; ${trade ? `it is order ${trade.order_id}'s, for ${trade.payment_amount} (the order is ${order.amount})` : "neither the merchant nor MockPay has it"}`,
          lines: lines([a]),
        });
    }
  }
  const confirms = new Map(byF("mockpay.confirm").map((g) => [g.key, g]));
  for (const trade of trades) {
    const g = confirms.get(trade.out_trade_no);
    if (g) resolve(g, trade.captured > 0 ? 1 : 0);
    if (trade.captured === 0) continue;
    if (g && allRefused(g))
      anomalies.push({
        f: "mockpay.confirm",
        key: trade.out_trade_no,
        message: `MockPay captured the trade though every Confirm was refused (${g.attempts.map(codeOf).join(", ")})`,
        lines: lines(g.attempts),
      });
    if (trade.captures !== 1 || !["SUCCESS", "PAID_LATE"].includes(trade.payment_status ?? ""))
      anomalies.push({
        f: "mockpay.confirm",
        key: trade.out_trade_no,
        message: `MockPay captured it; the merchant's payment is ${trade.payment_status} with ${trade.captures} captures in its ledger`,
        lines: g ? lines(g.attempts) : [],
      });
  }

  // Money, per order, as MockPay's books say.
  const orderLines = new Map<string, number[]>();
  for (const g of orderKeys) {
    const id = (ordersByKey.get(g.key) ?? [])[0]?.id;
    if (id) orderLines.set(id, lines(g.attempts));
  }
  for (const order of orderOf.values()) {
    const its = trades.filter((t) => t.order_id === order.id);
    const at = orderLines.get(order.id) ?? [];
    const keeps = ["PAID", "SHIPPED"].includes(order.status);
    for (const t of its) {
      const net = t.captured - t.refunded;
      const paying = keeps && t.payment_status === "SUCCESS";
      const problem =
        net < 0
          ? `MockPay refunded ${t.refunded} of trade ${t.out_trade_no}, more than the ${t.captured} it captured`
          : t.refunded !== t.merchant_refunded
            ? `MockPay refunded ${t.refunded} of trade ${t.out_trade_no}; the merchant recorded ${t.merchant_refunded} refunded`
            : !paying && net !== 0
              ? `trade ${t.out_trade_no} (${t.payment_status}) still holds ${net} of the shopper's money; the order is ${order.status} and keeps nothing of it`
              : paying && t.captured !== order.amount
                ? `trade ${t.out_trade_no} captured ${t.captured}; the shopper was told ${order.amount}`
                : undefined;
      if (problem) anomalies.push({ f: "money", key: order.id, message: problem, lines: at });
    }
    if (keeps && !its.some((t) => t.payment_status === "SUCCESS" && t.captured > 0))
      anomalies.push({
        f: "money",
        key: order.id,
        message: `the order is ${order.status}, yet MockPay captured none of its trades`,
        lines: at,
      });
  }

  // The server's own evidence for the same keys (the attempt log the order's story draws): at most one
  // copy took effect, and every copy answered without running names what absorbed it.
  const keyed = [...orderKeys, ...refundKeys].filter((g) => g.user);
  const subjectOf: Record<string, string> = {
    "orders.create": "order.create",
    "refunds.create": "refund.create",
  };
  const evidence = await sql<
    { subject: string; key: string; firsts: number; unnamed: number; absorbed: number }[]
  >`
    SELECT a.subject, a.key,
           coalesce(sum(a.count) FILTER (WHERE a.outcome = 'first'), 0)::int AS firsts,
           coalesce(sum(a.count) FILTER (WHERE a.outcome IN ('replayed', 'waited', 'replayed_error', 'conflict', 'mismatch')
                                           AND a.absorbed_by = ''), 0)::int AS unnamed,
           coalesce(sum(a.count) FILTER (WHERE a.absorbed_by <> ''), 0)::int AS absorbed
      FROM duplicate_attempt a
      JOIN unnest(${keyed.map((g) => g.user)}::text[], ${keyed.map((g) => subjectOf[g.f] ?? "")}::text[],
                  ${keyed.map((g) => g.key)}::text[]) AS k(scope, subject, key)
        ON a.scope = k.scope AND a.subject = k.subject AND a.key = k.key
     WHERE a.layer = 'service'
     GROUP BY 1, 2`;
  const groupOf = new Map(keyed.map((g) => [`${subjectOf[g.f]}\u0000${g.key}`, g]));
  let absorbedCopies = 0;
  for (const row of evidence) {
    absorbedCopies += row.absorbed;
    const g = groupOf.get(`${row.subject}\u0000${row.key}`);
    if (!g) continue;
    if (row.firsts > 1)
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `the server's attempt log has ${row.firsts} copies that took effect`,
        lines: lines(g.attempts),
      });
    if (row.unnamed > 0)
      anomalies.push({
        f: g.f,
        key: g.key,
        message: `the server's attempt log has ${row.unnamed} absorbed copies that do not say what absorbed them`,
        lines: lines(g.attempts),
      });
  }

  return {
    absorbedCopies,
    operations: attempts.length,
    keys: groups.length,
    unknown: attempts.filter((a) => a.outcome === "info").length,
    unknownResolved: resolved,
    anomalies,
  };
}
